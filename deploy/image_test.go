package deploy

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db/dbtest"
)

// TestImage builds the container image with `go tool task image` (podman)
// and inspects it: this sandbox builds images but cannot run containers.
// It checks what the Containerfile promises: the binary as entrypoint with
// the api as default command, a non-root user, the two ports, the version
// label, a static binary, and no other file than it and the CA
// certificates (no shell). Then it runs every role in the image's own
// filesystem, as the image would (StartsEveryRole).
func TestImage(t *testing.T) {
	t.Parallel()
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("no podman on this machine; `go tool task test` installs Debian's podman when run as root")
	}
	name := fmt.Sprintf("localhost/domainclass-test:%08x", rand.Uint32())
	build := exec.Command("go", "tool", "task", "image", "IMAGE="+name)
	build.Dir = ".."
	out, err := dbtest.RunTool(build, dbtest.BudgetImage)
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command(podman, "rmi", "--force", name).Run() })

	out, err = dbtest.RunTool(exec.Command(podman, "image", "inspect", name), dbtest.BudgetTool)
	require.NoError(t, err, "%s", out)
	var images []struct {
		Config imageConfig `json:"Config"`
	}
	require.NoError(t, json.Unmarshal(out, &images))
	require.Len(t, images, 1)
	c := images[0].Config
	require.Equal(t, []string{"/usr/local/bin/domainclass"}, c.Entrypoint)
	require.Equal(t, []string{"api"}, c.Cmd, "the role is the command: api by default")
	require.Equal(t, "65532:65532", c.User, "not root")
	require.Contains(t, c.ExposedPorts, "8080/tcp")
	require.Contains(t, c.ExposedPorts, "8081/tcp")
	require.Contains(t, c.Env, "HTTP_ADDR=0.0.0.0:8080")
	version, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(version)), c.Labels["org.opencontainers.image.version"])
	require.Equal(t, "domainclass", c.Labels["org.opencontainers.image.title"])

	bin, err := elf.Open("../build/image/domainclass")
	require.NoError(t, err)
	defer bin.Close()
	for _, p := range bin.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary: no dynamic loader in a scratch image")
	}

	// Every file of every layer.
	dir := t.TempDir()
	out, err = dbtest.RunTool(exec.Command(podman, "save", "--format", "oci-dir", "-o", filepath.Join(dir, "oci"), name), dbtest.BudgetTool)
	require.NoError(t, err, "%s", out)
	files, dirs := layerFiles(t, filepath.Join(dir, "oci"))
	slices.Sort(files)
	require.Equal(t, []string{"etc/ssl/certs/ca-certificates.crt", "usr/local/bin/domainclass"}, files,
		"nothing but the binary and the certificates: no shell")
	require.Contains(t, dirs, "tmp", "a /tmp for the upload spool (LIST_SPOOL_DIR)")
	require.Equal(t, int64(0o1777), dirs["tmp"], "/tmp open to every user, sticky, as on any Linux: %o", dirs["tmp"])

	t.Run("StartsEveryRole", func(t *testing.T) { startsEveryRole(t, podman, name, c) })
}

// imageConfig is what `podman image inspect` says the image runs.
type imageConfig struct {
	User         string              `json:"User"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	WorkingDir   string              `json:"WorkingDir"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	Env          []string            `json:"Env"`
	Labels       map[string]string   `json:"Labels"`
}

// layerFiles lists the regular files in an OCI image layout's layers, and
// the directories with their permission bits.
func layerFiles(t *testing.T, layout string) (files []string, dirs map[string]int64) {
	t.Helper()
	var index struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	readJSON(t, filepath.Join(layout, "index.json"), &index)
	require.Len(t, index.Manifests, 1)
	var manifest struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	readJSON(t, blob(layout, index.Manifests[0].Digest), &manifest)
	dirs = map[string]int64{}
	for _, l := range manifest.Layers {
		f, err := os.Open(blob(layout, l.Digest))
		require.NoError(t, err)
		br := bufio.NewReader(f)
		var r io.Reader = br
		if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			zr, err := gzip.NewReader(br)
			require.NoError(t, err)
			r = zr
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
			if h.Typeflag == tar.TypeDir {
				dirs[name] = h.Mode & 0o7777
			} else {
				files = append(files, name)
			}
		}
		f.Close()
	}
	return files, dirs
}

func blob(layout, digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(layout, "blobs", algo, hex)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), path)
}
