package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
)

// storeAnswers stores a model's answer for each domain, as the workers'
// statements do (provenance, then the result), with the given confidence:
// the database queues them by the review rules.
func storeAnswers(t *testing.T, d *db.DB, confidence int, answer bool, domains ...string) {
	t.Helper()
	_, err := d.Pool.Exec(context.Background(), `
		WITH p AS (
			INSERT INTO provenance (id, model, prompt_version, search, evidence)
			SELECT gen_random_uuid(), 'gpt-test', 'v3', 'homepage',
			       jsonb_build_array(jsonb_build_object('url', 'https://' || d || '/', 'title', d || ' home', 'snippet', 'We make things.'))
			FROM unnest($1::text[]) d
			RETURNING id, evidence->0->>'url' AS url
		)
		INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, provenance_id, classified_at)
		SELECT split_part(url, '/', 3), 'cpg', 'COMPLETED', $3, $2, 'Scripted.', id, now() FROM p
		ON CONFLICT (domain, classifier) DO UPDATE
		SET answer = excluded.answer, confidence = excluded.confidence, provenance_id = excluded.provenance_id`,
		domains, confidence, answer)
	require.NoError(t, err)
}

// reviewCall sends a request as an operator (user:password), or with an
// API key (Bearer …), or with nothing (""), through call.
type reviewCall func(method, path, body, auth string, header ...string) response

func reviewCaller(t *testing.T, call func(base, method, path, body string, header ...string) *http.Response, base string) reviewCall {
	return func(method, path, body, auth string, header ...string) response {
		t.Helper()
		if strings.HasPrefix(auth, "Bearer ") {
			header = append(header, "Authorization", auth)
		} else if auth != "" {
			req, _ := http.NewRequest("GET", "/", nil)
			user, pass, _ := strings.Cut(auth, ":")
			req.SetBasicAuth(user, pass)
			header = append(header, "Authorization", req.Header.Get("Authorization"))
		}
		r := call(base, method, path, body, header...)
		out, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		return response{status: r.StatusCode, header: r.Header, body: out}
	}
}

type reviewQueueBody struct {
	Queued, Reviewed int
	Reviewer         string
	Item             *struct {
		ID         int64
		Domain     string
		Reasons    []string
		Disputes   []string
		Confidence int
		Evidence   []struct{ URL, Title string }
	}
}

// exerciseReview makes real exchanges with the review routes and the
// disputes, in every documented status, through call (whose transport
// checks each against the document).
func exerciseReview(t *testing.T, call func(base, method, path, body string, header ...string) *http.Response) {
	t.Helper()
	ctx := context.Background()
	const ops = "ops:s3cret"
	b := setup(t, setupOpts{operators: []string{"ops", "s3cret"}})
	send := reviewCaller(t, call, b.url)
	keyA, keyB := "Bearer "+b.keyA, "Bearer "+b.keyB
	decode := func(r response, status int, v any) {
		t.Helper()
		require.Equal(t, status, r.status, "%s", r.body)
		require.NoError(t, json.Unmarshal(r.body, v))
	}

	storeAnswers(t, b.db, 2, true, "unsure.com", "doubt.com") // low confidence: queued
	storeAnswers(t, b.db, 5, true, "sure.com")                // confident: not queued (1% audit)

	// Operators only: no credentials, wrong ones, a caller's API key.
	for _, auth := range []string{"", "ops:wrong", "other:s3cret", keyA} {
		for _, path := range []string{"/review", "/review/next", "/review/stats", "/review/rules"} {
			r := send("GET", path, "", auth)
			requireProblem(t, r, 401, "unauthorized")
			require.Contains(t, r.header.Get("WWW-Authenticate"), "Basic")
		}
		requireProblem(t, send("POST", "/review/undo", "", auth), 401, "unauthorized")
		requireProblem(t, send("POST", "/review/items/1/verdict", `{"verdict": "yes"}`, auth), 401, "unauthorized")
	}

	// A dispute: queued at once, first in line; again: the same dispute;
	// another caller's: its own.
	var d1, again, d2 struct {
		ID     int64
		Note   string
		Review string
	}
	decode(send("POST", "/domains/sure.com/disputes", `{"classifier": "cpg", "note": "They sell software."}`, keyA), 201, &d1)
	require.Equal(t, "queued", d1.Review)
	decode(send("POST", "/domains/www.Sure.com/disputes", `{"note": "Again."}`, keyA), 200, &again)
	require.Equal(t, d1.ID, again.ID)
	require.Equal(t, "They sell software.", again.Note, "the first dispute")
	decode(send("POST", "/domains/sure.com/disputes", `{"note": "Me too."}`, keyB), 201, &d2)
	require.NotEqual(t, d1.ID, d2.ID)
	requireProblem(t, send("POST", "/domains/none.com/disputes", `{"note": "?"}`, keyA), 404, "not-found")
	requireProblem(t, send("POST", "/domains/sure.com/disputes", `{"note": ""}`, keyA), 400, "invalid-json")
	requireProblem(t, send("POST", "/domains/sure.com/disputes", `{"note": "x", "extra": 1}`, keyA), 400, "invalid-json")
	requireProblem(t, send("POST", "/domains/localhost/disputes", `{"note": "x"}`, keyA), 400, "invalid-domains")
	requireProblem(t, send("POST", "/domains/sure.com/disputes", `{"classifier": "nope", "note": "x"}`, keyA), 422, "unknown-classifier")
	requireProblem(t, send("POST", "/domains/sure.com/disputes", `{"note": "x"}`, keyA, "Content-Type", "text/plain"), 415, "unsupported-media-type")
	requireProblem(t, send("POST", "/domains/sure.com/disputes", `{"note": "x"}`, ""), 401, "unauthorized")

	var q reviewQueueBody
	decode(send("GET", "/review/next?classifier=cpg", "", ops), 200, &q)
	require.Equal(t, 3, q.Queued)
	require.Equal(t, "ops", q.Reviewer)
	require.Equal(t, "sure.com", q.Item.Domain, "a disputed answer first")
	require.Equal(t, []string{"disputed"}, q.Item.Reasons)
	require.Equal(t, []string{"They sell software.", "Me too."}, q.Item.Disputes)
	require.Equal(t, "sure.com home", q.Item.Evidence[0].Title)
	disputed := q.Item.ID
	decode(send("GET", "/review/next?exclude="+itoa(disputed), "", ops), 200, &q)
	require.Equal(t, "unsure.com", q.Item.Domain)
	require.Equal(t, []string{"low_confidence"}, q.Item.Reasons)
	requireProblem(t, send("GET", "/review/next?exclude=x", "", ops), 400, "invalid-query")
	requireProblem(t, send("GET", "/review/next?classifier=nope", "", ops), 422, "unknown-classifier")

	// Verdicts: an override each; a second verdict on one is refused.
	var act struct {
		ItemID           int64 `json:"item_id"`
		Verdict, Domain  string
		Queued, Reviewed int
		Item             *struct{ ID int64 }
	}
	decode(send("POST", "/review/items/"+itoa(disputed)+"/verdict", `{"verdict": "no", "note": "Sells software."}`, ops), 200, &act)
	require.Equal(t, [2]int{2, 1}, [2]int{act.Queued, act.Reviewed})
	o, err := db.OverrideGet(ctx, b.db.Pool, "cpg", "sure.com")
	require.NoError(t, err)
	require.False(t, o.Answer)
	require.Equal(t, "ops", o.SetBy)
	require.Equal(t, "Sells software.", o.Note)
	requireProblem(t, send("POST", "/review/items/"+itoa(disputed)+"/verdict", `{"verdict": "yes"}`, ops), 409, "already-reviewed")
	requireProblem(t, send("POST", "/review/items/999999/verdict", `{"verdict": "yes"}`, ops), 404, "not-found")
	requireProblem(t, send("POST", "/review/items/1/verdict", `{"verdict": "maybe"}`, ops), 400, "invalid-json")
	requireProblem(t, send("POST", "/review/items/1/verdict", `{"verdict": "yes"}`, ops, "Content-Type", "text/plain"), 415, "unsupported-media-type")
	// Another site's page, with the operator's credentials: refused.
	requireProblem(t, send("POST", "/review/items/"+itoa(q.Item.ID)+"/verdict", `{"verdict": "yes"}`, ops, "Sec-Fetch-Site", "cross-site"), 403, "cross-origin")
	requireProblem(t, send("POST", "/review/undo", "", ops, "Sec-Fetch-Site", "cross-site"), 403, "cross-origin")
	// The disputing caller sees its dispute reviewed.
	decode(send("POST", "/domains/sure.com/disputes", `{"note": "Again."}`, keyA), 201, &again)
	require.NotEqual(t, d1.ID, again.ID, "the answer is now the verdict: a dispute of it is a new one")

	decode(send("POST", "/review/items/"+itoa(q.Item.ID)+"/verdict", `{"verdict": "skip"}`, ops), 200, &act)
	decode(send("POST", "/review/undo", "", ops), 200, &act)
	require.Equal(t, "skip", act.Verdict)
	require.Equal(t, q.Item.ID, act.Item.ID, "the undone item comes back")
	decode(send("POST", "/review/undo", "", ops), 200, &act)
	require.Equal(t, "verdict", act.Verdict)
	_, err = db.OverrideGet(ctx, b.db.Pool, "cpg", "sure.com")
	require.ErrorIs(t, err, db.ErrNotFound, "the verdict's override is gone; there was none before")
	requireProblem(t, send("POST", "/review/undo", "", ops), 404, "not-found")
	// An override changed since the verdict: the undo refuses.
	decode(send("POST", "/review/items/"+itoa(disputed)+"/verdict", `{"verdict": "yes"}`, ops), 200, &act)
	override(t, b.db, "sure.com", "An operator decided.")
	requireProblem(t, send("POST", "/review/undo", "", ops), 409, "override-changed")

	var stats struct {
		Stats []struct {
			Model, PromptVersion string
			Audit                struct{ Reviewed int }
			Queues               []struct {
				Queue            string
				Reviewed, Agreed int
			}
		}
	}
	decode(send("GET", "/review/stats", "", ops), 200, &stats)
	require.Len(t, stats.Stats, 1)
	require.Equal(t, "gpt-test", stats.Stats[0].Model)
	require.Equal(t, 1, stats.Stats[0].Queues[0].Reviewed)
	require.Equal(t, 1, stats.Stats[0].Queues[0].Agreed, "the model said yes, and so did the reviewer")
	decode(send("GET", "/review/stats?classifier=cpg", "", ops), 200, &stats)
	requireProblem(t, send("GET", "/review/stats?classifier=nope", "", ops), 422, "unknown-classifier")
	var rules struct{ Rules []struct{ Classifier string } }
	decode(send("GET", "/review/rules", "", ops), 200, &rules)
	require.Len(t, rules.Rules, 2)
	decode(send("GET", "/review/rules?classifier=cpg", "", ops), 200, &rules)
	require.Len(t, rules.Rules, 1)
	requireProblem(t, send("GET", "/review/rules?classifier=nope", "", ops), 422, "unknown-classifier")

	page := send("GET", "/review", "", ops)
	require.Equal(t, 200, page.status)
	require.Contains(t, string(page.body), `<a id="domain" href="https://sure.com" target="_blank" rel="noopener noreferrer">sure.com</a>`, "the disputed verdict, first")
	require.Equal(t, "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; base-uri 'none'; "+
		"form-action 'none'; frame-ancestors 'none'", page.header.Get("Content-Security-Policy"))
	requireProblem(t, send("GET", "/review?classifier=nope", "", ops), 422, "unknown-classifier")

	// Internal errors, and Postgres down.
	broken := setup(t, setupOpts{operators: []string{"ops", "s3cret"}})
	_, err = broken.db.Pool.Exec(ctx, "DROP TABLE review_item, review_rule CASCADE")
	require.NoError(t, err)
	down := setup(t, setupOpts{db: downDB(t), operators: []string{"ops", "s3cret"}})
	for _, bundle := range []struct {
		b      *testBundle
		status int
	}{{broken, 500}, {down, 503}} {
		send := reviewCaller(t, call, bundle.b.url)
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/review", ""}, {"GET", "/review/next", ""}, {"POST", "/review/items/1/verdict", `{"verdict": "yes"}`},
			{"POST", "/review/undo", ""}, {"GET", "/review/stats", ""}, {"GET", "/review/rules", ""},
		} {
			require.Equal(t, bundle.status, send(r.method, r.path, r.body, ops).status, "%s %s", r.method, r.path)
		}
		require.Equal(t, bundle.status, send("POST", "/domains/a.com/disputes", `{"note": "x"}`, "Bearer "+bundle.b.keyA).status)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
