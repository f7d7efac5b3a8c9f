package jobs_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/domainclass/domainclass/jobs"
)

// The receiver of docs/webhooks.md: receive and verify below are the
// document's receiver.go, word for word (cmd/domainclass's TestDocs compares
// them). Here a delivery signed by the service's own jobs.SignWebhook goes
// through it, then the same delivery with its body changed, then one whose
// timestamp is too old.
func Example_receiver() {
	// receive logs with the log package; let the example's output show it.
	log.SetFlags(0)
	log.SetOutput(os.Stdout)
	defer func() {
		log.SetFlags(log.LstdFlags)
		log.SetOutput(os.Stderr)
	}()

	key := []byte("an example key: 24 to 64 random bytes") // WEBHOOK_SECRET is "whsec_" + base64(key)
	srv := httptest.NewServer(receive(key))
	defer srv.Close()

	id := "msg_01a226aa-5f28-7580-b7fa-b2964af28226_1764409029427207"
	body := []byte(`{"type":"classification.completed","job_id":"01a226aa-5f28-7580-b7fa-b2964af28226","classifier":"cpg","status":"COMPLETED","progress":{"total":1,"done":1}}`)
	deliver := func(sent, signed []byte, at time.Time) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/hook", bytes.NewReader(sent))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		req.Header.Set("webhook-signature", jobs.SignWebhook(key, id, at, signed))
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		_ = resp.Body.Close()
		fmt.Println("->", resp.Status)
	}

	deliver(body, body, time.Now())
	deliver(bytes.Replace(body, []byte(`"COMPLETED"`), []byte(`"FAILED"`), 1), body, time.Now())
	deliver(body, body, time.Now().Add(-time.Hour))

	// Output:
	// verified msg_01a226aa-5f28-7580-b7fa-b2964af28226_1764409029427207: {"type":"classification.completed","job_id":"01a226aa-5f28-7580-b7fa-b2964af28226","classifier":"cpg","status":"COMPLETED","progress":{"total":1,"done":1}}
	// -> 204 No Content
	// rejected: no matching signature
	// -> 401 Unauthorized
	// rejected: webhook-timestamp is too far from now
	// -> 401 Unauthorized
}

// receive is the webhook handler: it answers 401 to anything but a verified
// delivery.
func receive(key []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = verify(key, r.Header, body, time.Now())
		}
		if err != nil {
			log.Printf("rejected: %v", err)
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		// Dedupe on webhook-id, answer 2xx at once, and do the work afterwards.
		log.Printf("verified %s: %s", r.Header.Get("webhook-id"), body)
		w.WriteHeader(http.StatusNoContent)
	}
}

// verify checks a Standard Webhooks signature: HMAC-SHA256 of
// "webhook-id.webhook-timestamp.body", sent within 5 minutes of now.
func verify(key []byte, h http.Header, body []byte, now time.Time) error {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil {
		return errors.New("missing webhook-id or webhook-timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("webhook-timestamp is too far from now")
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := []byte("v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return errors.New("no matching signature")
}
