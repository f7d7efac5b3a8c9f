package db

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/domainclass/domainclass/classifier"
)

// Accepted is what ListRowsAccept wrote: the domains (first rows) an
// override and a cached answer answered, the rows they made final (Known),
// those rows by source, and whether it looked the list up at all.
type Accepted struct {
	Known
	OverrideRows, CacheRows int
	// LookedUp is false when the sample said the list is mostly new to
	// the service: every valid row was written PENDING, for the chunks.
	LookedUp bool
	// ScratchBytes is the size of the look-up's answers on disk.
	ScratchBytes int64
}

// ListRowsAccept writes list l's rows, each once, as rows() yields them
// (it reads them twice): a row whose domain an override answers, or a
// cached answer fresh under f and l.Want at now, is written answered,
// exactly as ListAnswerKnown would answer it (the override first; a
// duplicate with its own domain's answer), every other valid row PENDING
// and a rejected row REJECTED. It does not count them in the list's
// progress: the list is written after its rows (ListInsert, with l's
// counters set from what this returns). A source error comes back as is;
// the caller rolls tx back.
//
// A list mostly new to the service is written as ListRowsCopy writes it:
// when fewer than one in acceptShare of the first acceptSample distinct
// domains is answered, the rest is not looked up (a look-up costs an
// unanswered row about what its COPY does), and each chunk answers its
// own rows from overrides and the cache first.
//
// Otherwise the whole list is looked up in one statement, the way a set
// is: its (row, domain) pairs are copied to a temporary table and joined
// to the overrides and the cache (hashes of them, for a big list), and
// the answers, in row order, are kept in a scratch file in dir while the
// statement runs; then one COPY writes every row with its answer, merged
// by row number. A row is written once, answered: no PENDING tuple and
// its UPDATE (a second tuple and its index entries, the cost that made an
// answered list 5× its upload). Looking each domain up by key instead
// (an upload of a million answered rows: 22 s) or joining in an INSERT …
// SELECT (the INSERT writes a row at a time where COPY writes many) were
// measured slower.
//
// It holds the provenance purge off from its look-up to the commit (no
// trigger checks an insert's provenance; see queueProvenanceHold).
func ListRowsAccept(ctx context.Context, tx DBTX, l *classifier.List, rows func() (ListRowSource, error),
	f classifier.Freshness, now time.Time, dir string) (Accepted, error) {
	var a Accepted
	args := append([]any{l.Classifier}, freshArgs(f, l.Want, now)...)
	src, err := rows()
	if err != nil {
		return a, err
	}
	if a.LookedUp, err = acceptLooksUp(ctx, tx, src, args); err != nil || !a.LookedUp {
		if err != nil {
			return a, err
		}
		if src, err = rows(); err != nil {
			return a, err
		}
		_, err := ListRowsCopy(ctx, tx, l.ID, src)
		return a, err
	}

	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+provenanceLockKey+`)`); err != nil {
		return a, translate(err)
	}
	if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE accept_row (row int NOT NULL, domain text NOT NULL) ON COMMIT DROP`); err != nil {
		return a, translate(err)
	}
	if src, err = rows(); err != nil {
		return a, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"accept_row"}, []string{"row", "domain"}, acceptRows{src: src}); err != nil {
		if serr := src.Err(); serr != nil {
			return a, serr
		}
		return a, translate(err)
	}
	scratch, err := os.CreateTemp(dir, "domainclass-accept-*")
	if err != nil {
		return a, fmt.Errorf("error creating the upload's scratch file: %w", err)
	}
	_ = os.Remove(scratch.Name()) // it lives as long as its descriptor
	defer scratch.Close()
	if err := acceptLookUp(ctx, tx, args, scratch); err != nil {
		return a, err
	}
	if a.ScratchBytes, err = scratch.Seek(0, io.SeekCurrent); err != nil {
		return a, fmt.Errorf("error reading the upload's scratch file: %w", err)
	}
	if _, err := scratch.Seek(0, io.SeekStart); err != nil {
		return a, fmt.Errorf("error reading the upload's scratch file: %w", err)
	}
	if src, err = rows(); err != nil {
		return a, err
	}
	c := &copySource{listID: pgtype.UUID{Bytes: l.ID, Valid: true}, src: src,
		answers: &answerReader{r: bufio.NewReaderSize(scratch, 1<<16)}, accepted: &a}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"list_row"}, listRowAnswerColumns, c); err != nil {
		if serr := src.Err(); serr != nil {
			return a, serr
		}
		if c.answers.err != nil {
			return a, c.answers.err
		}
		return a, translate(err)
	}
	a.Rows = a.OverrideRows + a.CacheRows
	return a, nil
}

// acceptSample and acceptShare: ListRowsAccept looks a list up when at
// least one in acceptShare of its first acceptSample distinct domains is
// answered.
const (
	acceptSample = 10_000
	acceptShare  = 4
)

// acceptLooksUp reports whether at least one in acceptShare of the first
// acceptSample distinct domains src yields is answered (args: the
// classifier, then freshArgs). Each is looked up by its key: the LIMITs
// keep a sample's cost its own size whatever the tables hold.
func acceptLooksUp(ctx context.Context, tx DBTX, src ListRowSource, args []any) (bool, error) {
	domains := make([]string, 0, acceptSample)
	for len(domains) < acceptSample && src.Next() {
		if r := src.Row(); r.Domain != "" && r.FirstRow == 0 {
			domains = append(domains, r.Domain)
		}
	}
	if err := src.Err(); err != nil {
		return false, err
	}
	var answered int
	err := tx.QueryRow(ctx, `
		SELECT count(*) FROM unnest($1::text[]) AS d (domain)
		WHERE EXISTS (SELECT FROM (SELECT 1 FROM override o WHERE o.classifier = $2 AND o.domain = d.domain LIMIT 1) o)
		   OR EXISTS (SELECT FROM (SELECT 1 FROM result r WHERE r.classifier = $2 AND r.domain = d.domain AND `+freshResult("r", 3)+` LIMIT 1) r)`,
		append([]any{domains}, args...)...).Scan(&answered)
	return len(domains) > 0 && answered*acceptShare >= len(domains), translate(err)
}

// acceptRows is the COPY source of accept_row: every row with a domain,
// duplicates too (each gets its domain's answer, as ListAnswerKnown's
// statements give it).
type acceptRows struct{ src ListRowSource }

func (a acceptRows) Next() bool {
	for a.src.Next() {
		if a.src.Row().Domain != "" {
			return true
		}
	}
	return false
}

func (a acceptRows) Values() ([]any, error) {
	r := a.src.Row()
	return []any{int32(r.Row), r.Domain}, nil
}

func (a acceptRows) Err() error { return a.src.Err() }

// acceptLookUp writes to w the answers of accept_row's rows, in row order:
// each row's override, else its fresh cached answer (args: the classifier,
// then freshArgs), with the columns ListAnswerKnown writes.
func acceptLookUp(ctx context.Context, tx DBTX, args []any, w io.Writer) error {
	res, err := tx.Query(ctx, `
		SELECT u.row, o.domain IS NOT NULL,
		       CASE WHEN o.domain IS NOT NULL THEN o.answer ELSE r.answer END,
		       CASE WHEN o.domain IS NOT NULL THEN o.confidence ELSE r.confidence END,
		       CASE WHEN o.domain IS NOT NULL THEN `+overrideReasoning+` ELSE r.reasoning END,
		       CASE WHEN o.domain IS NOT NULL THEN o.set_at ELSE r.classified_at END,
		       CASE WHEN o.domain IS NOT NULL THEN o.provenance_id ELSE r.provenance_id END,
		       CASE WHEN o.domain IS NULL THEN NULLIF(p.model, '') END,
		       CASE WHEN o.domain IS NULL THEN NULLIF(p.prompt_version, '') END,
		       CASE WHEN o.domain IS NOT NULL THEN '' ELSE `+cacheEvidenceURLs+` END
		FROM accept_row u
		LEFT JOIN override o ON o.classifier = $1 AND o.domain = u.domain
		LEFT JOIN result r ON o.domain IS NULL AND r.classifier = $1 AND r.domain = u.domain AND `+freshResult("r", 2)+`
		LEFT JOIN provenance p ON p.id = r.provenance_id
		WHERE o.domain IS NOT NULL OR r.domain IS NOT NULL
		ORDER BY u.row`, args...)
	if err != nil {
		return translate(err)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var k rowAnswer
	_, err = pgx.ForEachRow(res, []any{&k.row, &k.override, &k.answer, &k.confidence, &k.reasoning, &k.classifiedAt,
		&k.provenanceID, &k.model, &k.promptVersion, &k.evidenceURLs}, func() error {
		return k.write(bw)
	})
	if err != nil {
		return translate(err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("error writing the upload's scratch file: %w", err)
	}
	return nil
}

// The answer columns of list_row a row answered at its upload is copied
// with, after listRowColumns.
var listRowAnswerColumns = append(listRowColumns[:len(listRowColumns):len(listRowColumns)],
	"answer", "confidence", "reasoning", "source", "classified_at", "provenance_id", "model", "prompt_version", "evidence_urls")

// rowAnswer is one row's answer as acceptLookUp reads it and the scratch
// file keeps it.
type rowAnswer struct {
	row                                int32
	override, answer                   bool
	confidence                         int16
	reasoning                          *string
	classifiedAt                       time.Time
	provenanceID                       pgtype.UUID
	model, promptVersion, evidenceURLs *string
}

// The scratch file's record: the row as a uvarint; a flags byte; the
// confidence; classified_at as a varint of Unix microseconds; the
// provenance id's 16 bytes when it has one; then each string present
// (reasoning, model, prompt version, evidence URLs) as a uvarint length
// and its bytes.
const (
	flagOverride = 1 << iota
	flagAnswer
	flagProvenance
	flagReasoning
	flagModel
	flagPromptVersion
	flagEvidenceURLs
)

func (k *rowAnswer) write(w *bufio.Writer) error {
	var flags byte
	set := func(b bool, f byte) {
		if b {
			flags |= f
		}
	}
	set(k.override, flagOverride)
	set(k.answer, flagAnswer)
	set(k.provenanceID.Valid, flagProvenance)
	set(k.reasoning != nil, flagReasoning)
	set(k.model != nil, flagModel)
	set(k.promptVersion != nil, flagPromptVersion)
	set(k.evidenceURLs != nil, flagEvidenceURLs)
	buf := binary.AppendUvarint(w.AvailableBuffer(), uint64(k.row))
	buf = append(buf, flags, byte(k.confidence))
	buf = binary.AppendVarint(buf, k.classifiedAt.UnixMicro())
	if k.provenanceID.Valid {
		buf = append(buf, k.provenanceID.Bytes[:]...)
	}
	for _, s := range []*string{k.reasoning, k.model, k.promptVersion, k.evidenceURLs} {
		if s != nil {
			buf = binary.AppendUvarint(buf, uint64(len(*s)))
			buf = append(buf, *s...)
		}
	}
	_, err := w.Write(buf)
	return err
}

// answerReader reads the scratch file's answers in row order, one ahead.
type answerReader struct {
	r    *bufio.Reader
	next struct {
		row    int
		values [9]any
	}
	started, done bool
	err           error
}

var (
	overrideValue any = string(classifier.SourceOverride)
	cacheValue    any = string(classifier.SourceCache)
)

// answer returns the answer columns of row, or nil when the scratch file
// has none for it. Rows are asked for in increasing order.
func (a *answerReader) answer(row int) []any {
	if !a.started {
		a.started = true
		a.advance()
	}
	if a.done || a.next.row != row {
		return nil
	}
	v := a.next.values
	a.advance()
	return v[:]
}

func (a *answerReader) advance() {
	if a.done {
		return
	}
	row, err := binary.ReadUvarint(a.r)
	if errors.Is(err, io.EOF) {
		a.done = true
		return
	}
	fail := func(err error) {
		a.done, a.err = true, fmt.Errorf("error reading the upload's scratch file: %w", err)
	}
	if err != nil {
		fail(err)
		return
	}
	var head [2]byte
	if _, err := io.ReadFull(a.r, head[:]); err != nil {
		fail(err)
		return
	}
	flags := head[0]
	micros, err := binary.ReadVarint(a.r)
	if err != nil {
		fail(err)
		return
	}
	v := &a.next.values
	v[0], v[1], v[3], v[4] = flags&flagAnswer != 0, int16(head[1]), cacheValue, time.UnixMicro(micros)
	if flags&flagOverride != 0 {
		v[3] = overrideValue
	}
	v[5] = nil
	if flags&flagProvenance != 0 {
		var id pgtype.UUID
		if _, err := io.ReadFull(a.r, id.Bytes[:]); err != nil {
			fail(err)
			return
		}
		id.Valid = true
		v[5] = id
	}
	for _, f := range []struct {
		at   int
		flag byte
	}{{2, flagReasoning}, {6, flagModel}, {7, flagPromptVersion}, {8, flagEvidenceURLs}} {
		v[f.at] = nil
		if flags&f.flag == 0 {
			continue
		}
		n, err := binary.ReadUvarint(a.r)
		if err != nil {
			fail(err)
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(a.r, b); err != nil {
			fail(err)
			return
		}
		v[f.at] = string(b)
	}
	a.next.row = int(row)
}
