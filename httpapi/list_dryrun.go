package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/admission"
	"github.com/domainclass/domainclass/classifier"
)

// listEstimate answers POST /lists?dry_run=true: admission.List's
// estimate (admission.DryRun) of the rows in sp, read by rows: how many
// domains are overridden, cached and fresh, what the fresh ones cost with
// the price table, and how long the list takes. It writes nothing.
func (s *Server) listEstimate(ctx context.Context, c *gin.Context, caller Caller, req listRequest, rows *listReader, sp *spool) {
	src, err := sp.read()
	if err != nil {
		s.writeError(c, err)
		return
	}
	l := &classifier.List{Caller: caller.Name, Classifier: req.cls.Name, Tier: req.tier, Want: req.want,
		Rows: rows.rows, Domains: rows.domains, Duplicates: rows.duplicates, Rejected: rows.rejected}
	r := s.admissionOf(admission.DryRun, caller, l, req.partial)
	r.Domains = spoolDomains{src}
	var a admission.Admission
	err = pgx.BeginFunc(ctx, s.pool(), func(tx pgx.Tx) error {
		var err error
		if a, err = admission.List(ctx, tx, r); err != nil {
			return err
		}
		return errDryRun // nothing that was written outlives the estimate
	})
	if err != nil && !errors.Is(err, errDryRun) {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, a.Estimate)
}

var errDryRun = errors.New("dry run")
