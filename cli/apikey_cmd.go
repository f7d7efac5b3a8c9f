package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/internal/apikey"
)

var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// apikeyCommands manage callers' API keys: create, list, revoke, limits.
func (c *base) apikeyCommands() []*cobra.Command {
	return []*cobra.Command{c.apikeyCreateCommand(), c.apikeyListCommand(), c.apikeyRevokeCommand(), c.apikeyLimitsCommand()}
}

// withLimits adds a key's limits' flags to cmd.
func withLimits(cmd *cobra.Command, k *db.APIKey) *cobra.Command {
	cmd.Flags().IntVar(&k.RatePerMinute, "rate-per-minute", 0, "accepted jobs per minute for this key (0: the default)")
	cmd.Flags().IntVar(&k.MaxQueuedDomains, "max-queued-domains", 0, "domains queued and not yet answered for this key (0: the default)")
	cmd.Flags().IntVar(&k.MaxStoredRows, "max-stored-rows", 0, "rows of this key's lists kept until purged (0: the default)")
	return cmd
}

// apikeyCreate is `apikey create`.
type apikeyCreate struct {
	*base
	invocation
	key    db.APIKey
	budget db.CallerBudget
}

func (c *base) apikeyCreateCommand() *cobra.Command {
	o := &apikeyCreate{base: c}
	return command(withLimits(withBudget(&cobra.Command{
		Use:   "create NAME [--rate-per-minute N] [--max-queued-domains N] [--max-stored-rows N] [--model-calls-per-day N] [--spend-per-day-usd X]",
		Short: "create a caller's key and print it once (only its hash is stored)",
	}, &o.budget), &o.key), o)
}

func (o *apikeyCreate) Validate() error {
	if err := o.keyNameArg(); err != nil {
		return err
	}
	if err := checkLimits(o.key); err != nil {
		return err
	}
	return checkBudget(o.budget)
}

func (o *apikeyCreate) Run(ctx context.Context) error {
	name := o.args[0]
	return o.withDB(ctx, "apikey", func(d *db.DB, _ Deployment) error {
		key, hash := apikey.New()
		k := o.key
		k.Name, k.Prefix = name, key[:8]
		err := db.APIKeyInsert(ctx, d.Pool, k, hash)
		if errors.Is(err, db.ErrConflict) {
			return fmt.Errorf("an API key named %q already exists", name)
		} else if err != nil {
			return err
		}
		if err := db.CallerBudgetSet(ctx, d.Pool, name, o.budget); err != nil {
			return err
		}
		fmt.Fprintf(o.stderr, "API key %q created. It is shown once, here; only its hash is stored:\n", name)
		fmt.Fprintln(o.stdout, key)
		return nil
	})
}

// apikeyList is `apikey list`.
type apikeyList struct {
	*base
	invocation
}

func (c *base) apikeyListCommand() *cobra.Command {
	return command(&cobra.Command{
		Use:   "list",
		Short: "list keys: name, prefix, created, last used, revoked, limits",
	}, &apikeyList{base: c})
}

func (o *apikeyList) Validate() error { return o.noArgs() }

func (o *apikeyList) Run(ctx context.Context) error {
	return o.withDB(ctx, "apikey", func(d *db.DB, dep Deployment) error {
		keys, err := db.APIKeyList(ctx, d.Pool)
		if err != nil {
			return err
		}
		budgets, err := db.CallerBudgets(ctx, d.Pool)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			fmt.Fprintln(o.stdout, "no API keys; create one with: domainclass apikey create NAME")
			return nil
		}
		def := dep.Callers()
		tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKEY\tCREATED\tLAST USED\tREVOKED\tJOBS/MIN\tMAX QUEUED\tMAX STORED ROWS\tMODEL CALLS/DAY\tSPEND/DAY")
		for _, k := range keys {
			b := budgets[k.Name]
			fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, k.Prefix, stamp(&k.CreatedAt), stamp(k.LastUsedAt), stamp(k.RevokedAt),
				limitText(k.RatePerMinute, def.RatePerMinute), limitText(k.MaxQueuedDomains, def.MaxQueuedDomains),
				limitText(k.MaxStoredRows, def.MaxStoredRows), callsText(b.ModelCallsPerDay), usdText(b.SpendPerDayUSD))
		}
		return tw.Flush()
	})
}

// apikeyRevoke is `apikey revoke`.
type apikeyRevoke struct {
	*base
	invocation
}

func (c *base) apikeyRevokeCommand() *cobra.Command {
	return command(&cobra.Command{
		Use:   "revoke NAME",
		Short: "revoke a key (refused within 5 s)",
	}, &apikeyRevoke{base: c})
}

func (o *apikeyRevoke) Validate() error { return o.keyNameArg() }

func (o *apikeyRevoke) Run(ctx context.Context) error {
	return o.withDB(ctx, "apikey", func(d *db.DB, dep Deployment) error {
		if err := db.APIKeyRevoke(ctx, d.Pool, o.args[0]); err != nil {
			return keyError(err, o.args[0])
		}
		fmt.Fprintf(o.stdout, "API key %q revoked; requests with it are refused within %s.\n", o.args[0], dep.Callers().AuthCacheTTL)
		return nil
	})
}

// apikeyLimits is `apikey limits`: a key's request limits and its daily
// model budget.
type apikeyLimits struct {
	*base
	invocation
	key    db.APIKey
	budget db.CallerBudget
}

func (c *base) apikeyLimitsCommand() *cobra.Command {
	o := &apikeyLimits{base: c}
	return command(withLimits(withBudget(&cobra.Command{
		Use:   "limits NAME [--rate-per-minute N] [--max-queued-domains N] [--max-stored-rows N] [--model-calls-per-day N] [--spend-per-day-usd X]",
		Short: "set a key's limits (0: the default) and daily model budget (0: none)",
		Long: "Sets a key's limits. --rate-per-minute, --max-queued-domains and --max-stored-rows are set\n" +
			"together (one not given returns to the default), unless only the budget is given.\n" +
			"--model-calls-per-day and --spend-per-day-usd change only when given (0 removes that limit):\n" +
			"the model calls the key's jobs and lists may make a day (UTC), refreshes included, and what\n" +
			"they may cost, priced with the dry run's table.",
	}, &o.budget), &o.key), o)
}

func (o *apikeyLimits) Validate() error {
	if err := o.keyNameArg(); err != nil {
		return err
	}
	if err := checkLimits(o.key); err != nil {
		return err
	}
	return checkBudget(o.budget)
}

func (o *apikeyLimits) Run(ctx context.Context) error {
	name := o.args[0]
	budgetGiven := o.given("model-calls-per-day") || o.given("spend-per-day-usd")
	limitsGiven := o.given("rate-per-minute") || o.given("max-queued-domains") || o.given("max-stored-rows") || !budgetGiven
	return o.withDB(ctx, "apikey", func(d *db.DB, dep Deployment) error {
		if limitsGiven {
			if err := db.APIKeySetLimits(ctx, d.Pool, name, o.key); err != nil {
				return keyError(err, name)
			}
			def := dep.Callers()
			fmt.Fprintf(o.stdout, "API key %q: %s jobs a minute, %s queued domains, %s stored list rows.\n", name,
				limitText(o.key.RatePerMinute, def.RatePerMinute), limitText(o.key.MaxQueuedDomains, def.MaxQueuedDomains),
				limitText(o.key.MaxStoredRows, def.MaxStoredRows))
		}
		if !budgetGiven {
			return nil
		}
		return o.setBudget(ctx, d, name)
	})
}

// withBudget adds the daily model budget's flags to cmd.
func withBudget(cmd *cobra.Command, b *db.CallerBudget) *cobra.Command {
	cmd.Flags().IntVar(&b.ModelCallsPerDay, "model-calls-per-day", 0, "model calls this key's work may make a day, UTC (0: no limit)")
	cmd.Flags().Float64Var(&b.SpendPerDayUSD, "spend-per-day-usd", 0, "US dollars this key's model calls may cost a day, UTC, by the price table (0: no limit)")
	return cmd
}

// setBudget changes the budget flags given for key name, the others
// staying as they were.
func (o *apikeyLimits) setBudget(ctx context.Context, d *db.DB, name string) error {
	if _, err := db.APIKeyGetByName(ctx, d.Pool, name); err != nil {
		return keyError(err, name)
	}
	budgets, err := db.CallerBudgets(ctx, d.Pool)
	if err != nil {
		return err
	}
	b := budgets[name]
	if o.given("model-calls-per-day") {
		b.ModelCallsPerDay = o.budget.ModelCallsPerDay
	}
	if o.given("spend-per-day-usd") {
		b.SpendPerDayUSD = o.budget.SpendPerDayUSD
	}
	if err := db.CallerBudgetSet(ctx, d.Pool, name, b); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "API key %q: %s model calls a day, %s a day (UTC).\n", name, callsText(b.ModelCallsPerDay), usdText(b.SpendPerDayUSD))
	return nil
}

func checkBudget(b db.CallerBudget) error {
	if b.ModelCallsPerDay < 0 || b.SpendPerDayUSD < 0 || math.IsNaN(b.SpendPerDayUSD) || math.IsInf(b.SpendPerDayUSD, 0) {
		return usagef("a budget must not be negative")
	}
	return nil
}

func callsText(n int) string {
	if n == 0 {
		return "no limit"
	}
	return fmt.Sprint(n)
}

func usdText(usd float64) string {
	if usd == 0 {
		return "no limit"
	}
	return "$" + strconv.FormatFloat(usd, 'f', -1, 64)
}

// keyNameArg takes exactly one valid key name.
func (i *invocation) keyNameArg() error {
	if len(i.args) != 1 {
		return usagef("%s takes 1 name, got %d", i.path(), len(i.args))
	}
	if !keyName.MatchString(i.args[0]) {
		return usagef("%q is not a valid key name: 1-64 letters, digits, dots, dashes or underscores", i.args[0])
	}
	return nil
}

func checkLimits(k db.APIKey) error {
	if k.RatePerMinute < 0 || k.MaxQueuedDomains < 0 || k.MaxStoredRows < 0 {
		return usagef("limits must not be negative")
	}
	return nil
}

func keyError(err error, name string) error {
	if errors.Is(err, db.ErrNotFound) {
		return fmt.Errorf("no API key named %q", name)
	}
	return err
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
