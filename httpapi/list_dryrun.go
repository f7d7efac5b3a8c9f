package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// listEstimate answers POST /lists?dry_run=true: how many domains are
// overridden, cached and fresh, what the fresh ones cost with the price table,
// and how long the list takes (estimate: the deployment's measured
// throughput, the rows' CPU, the lists it shares with). It writes nothing.
func (s *Server) listEstimate(ctx context.Context, c *gin.Context, cls *classifier.Classifier, tier string, fresh classifier.Want,
	rows *listReader, sp *spool) {
	src, err := sp.read()
	if err != nil {
		s.writeError(c, err)
		return
	}
	var est wire.ListEstimate
	err = pgx.BeginFunc(ctx, s.pool(), func(tx pgx.Tx) error {
		var err error
		est.Override, est.Cache, err = db.DomainsAnswered(ctx, tx, cls.Name, spoolDomains{src}, s.cfg.Estimate.Freshness, fresh, time.Now())
		if err != nil {
			return err
		}
		est.Rows, est.Domains, est.Duplicates, est.Rejected = rows.rows, rows.domains, rows.duplicates, rows.rejected
		est.Model = s.cfg.Estimate.Model
		stats, err := db.ModelStatsRecent(ctx, tx, cls.Name, modelStatsSample)
		if err != nil {
			return err
		}
		est.LLM = est.Domains - est.Override - est.Cache
		est.ModelCalls = est.LLM
		// The deprecated names, kept one release.
		est.Overridden, est.Known, est.Cached, est.Fresh = est.Override, est.Override, est.Cache, est.LLM
		load, err := db.LoadRecent(ctx, tx, throughputWindow, throughputStep, rowsWindow, rowsMinMeasured)
		if err != nil {
			return err
		}
		var standard, economy wire.TierEstimate
		standard, economy, est.Basis = s.cfg.Estimate.estimate(est, stats, load)
		est.Tier, est.Tiers = tier, map[string]wire.TierEstimate{classifier.TierStandard: standard, classifier.TierEconomy: economy}
		est.EstimatedSeconds, est.EstimatedCostUSD = est.Tiers[tier].EstimatedSeconds, est.Tiers[tier].EstimatedCostUSD
		return errDryRun // nothing that was written outlives the estimate
	})
	if err != nil && !errors.Is(err, errDryRun) {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, est)
}

var errDryRun = errors.New("dry run")

// modelStatsSample is how many recent model answers the estimate reads.
const modelStatsSample = 1000

// batchWindowSeconds is the economy tier's bound: the provider's 24-hour
// completion window (most batches end within hours).
const batchWindowSeconds = 24 * 60 * 60
