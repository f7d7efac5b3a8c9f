package jobs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com) headers of a delivery.
const (
	headerWebhookID        = "webhook-id"
	headerWebhookTimestamp = "webhook-timestamp"
	headerWebhookSignature = "webhook-signature"
)

// webhookSecretPrefix marks a Standard Webhooks symmetric secret.
const webhookSecretPrefix = "whsec_"

// ParseWebhookSecret returns the key of a Standard Webhooks secret:
// "whsec_" followed by the standard base64 of 24 to 64 random bytes (the
// spec's range). Its errors never repeat the secret.
func ParseWebhookSecret(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, webhookSecretPrefix)
	if !ok {
		return nil, errors.New("must start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New("must be whsec_ followed by standard base64 (with padding)")
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("must hold 24 to 64 random bytes, got %d", len(key))
	}
	return key, nil
}

// SignWebhook returns the webhook-signature header of a delivery: "v1,"
// and the base64 HMAC-SHA256, under key, of "id.timestamp.body" with the
// timestamp in Unix seconds (Standard Webhooks, symmetric scheme).
func SignWebhook(key []byte, id string, timestamp time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, timestamp.Unix(), 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
