package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
)

const apikeyUsage = `Usage:
  domainclass apikey create NAME [--rate-per-minute N] [--max-queued-domains N]
  domainclass apikey list
  domainclass apikey revoke NAME
  domainclass apikey limits NAME [--rate-per-minute N] [--max-queued-domains N]   (0: the default)
`

var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// runAPIKey manages callers' API keys.
func runAPIKey(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{`"apikey" needs a subcommand: create, list, revoke or limits`}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, apikeyUsage)
		return nil
	case "create", "list", "revoke", "limits":
	default:
		return &usageError{fmt.Sprintf("unknown apikey subcommand %q (want create, list, revoke or limits)", args[0])}
	}
	sub := args[0]
	fs := newFlagSet("apikey "+sub, "apikey "+sub+" NAME", stdout)
	rate := fs.Int("rate-per-minute", 0, "accepted jobs per minute for this key (0: the default)")
	queued := fs.Int("max-queued-domains", 0, "domains queued and not yet answered for this key (0: the default)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	wantNames := map[string]int{"create": 1, "list": 0, "revoke": 1, "limits": 1}[sub]
	if fs.NArg() != wantNames {
		return &usageError{fmt.Sprintf("apikey %s takes %d name(s), got %d", sub, wantNames, fs.NArg())}
	}
	name := fs.Arg(0)
	if wantNames == 1 && !keyName.MatchString(name) {
		return &usageError{fmt.Sprintf("%q is not a valid key name: 1-64 letters, digits, dots, dashes or underscores", name)}
	}
	if *rate < 0 || *queued < 0 {
		return &usageError{"limits must not be negative"}
	}

	cfg, err := LoadConfig(environ)
	if err != nil {
		return err
	}
	d, err := cfg.openDB(ctx, "apikey", 2)
	if err != nil {
		return err
	}
	defer d.Close()

	switch sub {
	case "create":
		key, hash := httpapi.NewAPIKey()
		if err := d.APIKeyCreate(ctx, db.APIKey{Name: name, Prefix: key[:8], RatePerMinute: *rate, MaxQueuedDomains: *queued}, hash); err != nil {
			return fmt.Errorf("%s", classifier.ErrorMessage(err))
		}
		fmt.Fprintf(stderr, "API key %q created. It is shown once, here; only its hash is stored:\n", name)
		fmt.Fprintln(stdout, key)
	case "revoke":
		if err := d.APIKeyRevoke(ctx, name); err != nil {
			return fmt.Errorf("%s", classifier.ErrorMessage(err))
		}
		fmt.Fprintf(stdout, "API key %q revoked; requests with it are refused within %s.\n", name, cfg.Settings.AuthCacheTTL)
	case "limits":
		if err := d.APIKeySetLimits(ctx, name, *rate, *queued); err != nil {
			return fmt.Errorf("%s", classifier.ErrorMessage(err))
		}
		fmt.Fprintf(stdout, "API key %q: %s jobs a minute, %s queued domains.\n", name,
			limitText(*rate, cfg.Settings.CallerRatePerMinute), limitText(*queued, cfg.Settings.CallerMaxQueuedDomains))
	case "list":
		keys, err := d.APIKeyList(ctx)
		if err != nil {
			return fmt.Errorf("%s", classifier.ErrorMessage(err))
		}
		if len(keys) == 0 {
			fmt.Fprintln(stdout, "no API keys; create one with: domainclass apikey create NAME")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKEY\tCREATED\tLAST USED\tREVOKED\tJOBS/MIN\tMAX QUEUED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\n", k.Name, k.Prefix, stamp(&k.CreatedAt), stamp(k.LastUsedAt), stamp(k.RevokedAt),
				limitText(k.RatePerMinute, cfg.Settings.CallerRatePerMinute), limitText(k.MaxQueuedDomains, cfg.Settings.CallerMaxQueuedDomains))
		}
		return tw.Flush()
	}
	return nil
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04")
}

func limitText(v, def int) string {
	if v == 0 {
		return fmt.Sprintf("%d (default)", def)
	}
	return fmt.Sprint(v)
}
