package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/db"
)

// The commands that set up and start the service. What they start is wired
// in cmd/domainclass (Deployment); here are their flags and their output.

type migrate struct {
	*base
	invocation
}

func (c *base) migrateCommand() *cobra.Command {
	return command(&cobra.Command{
		Use:   "migrate",
		Short: "apply River's and the app's migrations (safe to repeat, and concurrently)",
	}, &migrate{base: c})
}

func (o *migrate) Validate() error { return o.noArgs() }

func (o *migrate) Run(ctx context.Context) error {
	dep, err := o.deployment()
	if err != nil {
		return err
	}
	d, err := dep.OpenDB(ctx, "migrate", 4)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := db.Migrate(ctx, d, dep.LibraryLogger(o.stderr))
	if err != nil {
		return fmt.Errorf("migration failed: %w", err)
	}
	if len(res.River)+len(res.App) == 0 {
		fmt.Fprintln(o.stdout, "migrate: the database is up to date")
		return nil
	}
	for _, v := range res.River {
		fmt.Fprintf(o.stdout, "migrate: applied River migration %s\n", v)
	}
	for _, v := range res.App {
		fmt.Fprintf(o.stdout, "migrate: applied app migration %s\n", v)
	}
	return nil
}

type roles struct {
	*base
	invocation
	roles db.Roles
}

func (c *base) rolesCommand() *cobra.Command {
	o := &roles{base: c}
	cmd := &cobra.Command{
		Use:   "roles",
		Short: "create the api and worker roles with only what each uses (as the owner; again after each migrate)",
		Long: `Creates the Postgres login roles the api and worker processes can run as
(when they do not exist; without a password: set one with ALTER ROLE, or use
your own authentication) and grants each only what it uses in DATABASE_SCHEMA:
the api cannot change answers or delete River jobs, the worker cannot read
API keys. Run it as the owner of the tables, after migrate, and again after
every migrate that adds a table.`,
	}
	cmd.Flags().StringVar(&o.roles.API, "api", "domainclass_api", "the api processes' role")
	cmd.Flags().StringVar(&o.roles.Worker, "worker", "domainclass_worker", "the worker processes' role")
	return command(cmd, o)
}

func (o *roles) Validate() error { return o.noArgs() }

func (o *roles) Run(ctx context.Context) error {
	return o.withDB(ctx, "roles", func(d *db.DB, _ Deployment) error {
		if err := db.GrantRoles(ctx, d.Pool, d.Schema, o.roles); err != nil {
			return fmt.Errorf("error granting roles: %w", err)
		}
		fmt.Fprintf(o.stdout, "roles: %s (api) and %s (worker) hold what they use; set their passwords with ALTER ROLE\n",
			o.roles.API, o.roles.Worker)
		return nil
	})
}

type serve struct {
	*base
	invocation
	role string
}

func (c *base) serveCommand(role, short string) *cobra.Command {
	return command(&cobra.Command{Use: role, Short: short}, &serve{base: c, role: role})
}

func (o *serve) Validate() error { return o.noArgs() }

func (o *serve) Run(ctx context.Context) error {
	dep, err := o.deployment()
	if err != nil {
		return err
	}
	return dep.Serve(ctx, o.role, o.stdout, o.stderr)
}
