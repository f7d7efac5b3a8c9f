package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
)

var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// apikeyCommands manage callers' API keys: create, list, revoke, limits.
func (c *cli) apikeyCommands() []*cobra.Command {
	withLimits := func(cmd *cobra.Command, k *db.APIKey) *cobra.Command {
		cmd.Flags().IntVar(&k.RatePerMinute, "rate-per-minute", 0, "accepted jobs per minute for this key (0: the default)")
		cmd.Flags().IntVar(&k.MaxQueuedDomains, "max-queued-domains", 0, "domains queued and not yet answered for this key (0: the default)")
		cmd.Flags().IntVar(&k.MaxStoredRows, "max-stored-rows", 0, "rows of this key's lists kept until purged (0: the default)")
		return cmd
	}
	var created db.APIKey
	var budget db.CallerBudget
	create := withLimits(withBudget(&cobra.Command{
		Use:   "create NAME [--rate-per-minute N] [--max-queued-domains N] [--max-stored-rows N] [--model-calls-per-day N] [--spend-per-day-usd X]",
		Short: "create a caller's key and print it once (only its hash is stored)",
		Args:  keyNameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLimits(created); err != nil {
				return err
			}
			if err := checkBudget(budget); err != nil {
				return err
			}
			return c.withDB(cmd, "apikey", func(d *db.DB, _ Config) error {
				key, hash := httpapi.NewAPIKey()
				k := created
				k.Name, k.Prefix = args[0], key[:8]
				err := db.APIKeyInsert(cmd.Context(), d.Pool, k, hash)
				if errors.Is(err, db.ErrConflict) {
					return fmt.Errorf("an API key named %q already exists", args[0])
				} else if err != nil {
					return err
				}
				if err := db.CallerBudgetSet(cmd.Context(), d.Pool, args[0], budget); err != nil {
					return err
				}
				fmt.Fprintf(c.stderr, "API key %q created. It is shown once, here; only its hash is stored:\n", args[0])
				fmt.Fprintln(c.stdout, key)
				return nil
			})
		},
	}, &budget), &created)

	list := &cobra.Command{
		Use:   "list",
		Short: "list keys: name, prefix, created, last used, revoked, limits",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withDB(cmd, "apikey", func(d *db.DB, cfg Config) error {
				keys, err := db.APIKeyList(cmd.Context(), d.Pool)
				if err != nil {
					return err
				}
				budgets, err := db.CallerBudgets(cmd.Context(), d.Pool)
				if err != nil {
					return err
				}
				if len(keys) == 0 {
					fmt.Fprintln(c.stdout, "no API keys; create one with: domainclass apikey create NAME")
					return nil
				}
				tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tKEY\tCREATED\tLAST USED\tREVOKED\tJOBS/MIN\tMAX QUEUED\tMAX STORED ROWS\tMODEL CALLS/DAY\tSPEND/DAY")
				for _, k := range keys {
					b := budgets[k.Name]
					fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, k.Prefix, stamp(&k.CreatedAt), stamp(k.LastUsedAt), stamp(k.RevokedAt),
						limitText(k.RatePerMinute, cfg.Callers.RatePerMinute), limitText(k.MaxQueuedDomains, cfg.Callers.MaxQueuedDomains),
						limitText(k.MaxStoredRows, cfg.Callers.MaxStoredRows), callsText(b.ModelCallsPerDay), usdText(b.SpendPerDayUSD))
				}
				return tw.Flush()
			})
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "revoke a key (refused within AUTH_CACHE_TTL)",
		Args:  keyNameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withDB(cmd, "apikey", func(d *db.DB, cfg Config) error {
				if err := db.APIKeyRevoke(cmd.Context(), d.Pool, args[0]); err != nil {
					return keyError(err, args[0])
				}
				fmt.Fprintf(c.stdout, "API key %q revoked; requests with it are refused within %s.\n", args[0], cfg.AuthCacheTTL)
				return nil
			})
		},
	}

	return []*cobra.Command{create, list, revoke, c.apikeyLimitsCommand(withLimits)}
}

// apikeyLimitsCommand is `apikey limits`: a key's request limits and its
// daily model budget.
func (c *cli) apikeyLimitsCommand(withLimits func(*cobra.Command, *db.APIKey) *cobra.Command) *cobra.Command {
	var set db.APIKey
	var setBudget db.CallerBudget
	return withLimits(withBudget(&cobra.Command{
		Use:   "limits NAME [--rate-per-minute N] [--max-queued-domains N] [--max-stored-rows N] [--model-calls-per-day N] [--spend-per-day-usd X]",
		Short: "set a key's limits (0: the default) and daily model budget (0: none)",
		Long: "Sets a key's limits. --rate-per-minute, --max-queued-domains and --max-stored-rows are set\n" +
			"together (one not given returns to the default), unless only the budget is given.\n" +
			"--model-calls-per-day and --spend-per-day-usd change only when given (0 removes that limit):\n" +
			"the model calls the key's jobs and lists may make a day (UTC), refreshes included, and what\n" +
			"they may cost, priced with the dry run's table.",
		Args: keyNameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLimits(set); err != nil {
				return err
			}
			if err := checkBudget(setBudget); err != nil {
				return err
			}
			f := cmd.Flags()
			budgetGiven := f.Changed("model-calls-per-day") || f.Changed("spend-per-day-usd")
			limitsGiven := f.Changed("rate-per-minute") || f.Changed("max-queued-domains") || f.Changed("max-stored-rows") || !budgetGiven
			return c.withDB(cmd, "apikey", func(d *db.DB, cfg Config) error {
				if limitsGiven {
					if err := db.APIKeySetLimits(cmd.Context(), d.Pool, args[0], set); err != nil {
						return keyError(err, args[0])
					}
					fmt.Fprintf(c.stdout, "API key %q: %s jobs a minute, %s queued domains, %s stored list rows.\n", args[0],
						limitText(set.RatePerMinute, cfg.Callers.RatePerMinute), limitText(set.MaxQueuedDomains, cfg.Callers.MaxQueuedDomains),
						limitText(set.MaxStoredRows, cfg.Callers.MaxStoredRows))
				}
				if !budgetGiven {
					return nil
				}
				return c.setBudget(cmd, d, args[0], setBudget)
			})
		},
	}, &setBudget), &set)
}

// withBudget adds the daily model budget's flags to cmd.
func withBudget(cmd *cobra.Command, b *db.CallerBudget) *cobra.Command {
	cmd.Flags().IntVar(&b.ModelCallsPerDay, "model-calls-per-day", 0, "model calls this key's work may make a day, UTC (0: no limit)")
	cmd.Flags().Float64Var(&b.SpendPerDayUSD, "spend-per-day-usd", 0, "US dollars this key's model calls may cost a day, UTC, by the price table (0: no limit)")
	return cmd
}

// setBudget changes the budget flags given on cmd for key name, the others
// staying as they were.
func (c *cli) setBudget(cmd *cobra.Command, d *db.DB, name string, given db.CallerBudget) error {
	ctx := cmd.Context()
	if _, err := db.APIKeyGetByName(ctx, d.Pool, name); err != nil {
		return keyError(err, name)
	}
	budgets, err := db.CallerBudgets(ctx, d.Pool)
	if err != nil {
		return err
	}
	b := budgets[name]
	if cmd.Flags().Changed("model-calls-per-day") {
		b.ModelCallsPerDay = given.ModelCallsPerDay
	}
	if cmd.Flags().Changed("spend-per-day-usd") {
		b.SpendPerDayUSD = given.SpendPerDayUSD
	}
	if err := db.CallerBudgetSet(ctx, d.Pool, name, b); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "API key %q: %s model calls a day, %s a day (UTC).\n", name, callsText(b.ModelCallsPerDay), usdText(b.SpendPerDayUSD))
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

// withDB reads the config, opens a small pool for command and runs fn.
func (c *cli) withDB(cmd *cobra.Command, command string, fn func(*db.DB, Config) error) error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	d, err := cfg.openDB(cmd.Context(), command, 2)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(d, cfg)
}

// keyNameArg takes exactly one valid key name.
func keyNameArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usagef("%s takes 1 name, got %d", cmd.CommandPath(), len(args))
	}
	if !keyName.MatchString(args[0]) {
		return usagef("%q is not a valid key name: 1-64 letters, digits, dots, dashes or underscores", args[0])
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
