package jobs

// The names the external tests use of what jobs keeps to itself: the
// steps that end work, the args of the jobs only jobs inserts, the
// outputs its jobs record, and the values the tests hold the workers to.

type (
	BatchArgs       = batchArgs
	ListSweepArgs   = listSweepArgs
	Ending          = ending
	ClassifyOutput  = classifyOutput
	ListChunkOutput = listChunkOutput
	ListSweepOutput = listSweepOutput
	PurgeCounts     = purgeCounts
)

var (
	EndJob     = endJob
	EndList    = endList
	Completed  = asCompleted
	Failed     = asFailed
	Cancelled  = asCancelled
	FeedChunks = feedChunks
)

const (
	DefaultRowStoreMax  = defaultRowStoreMax
	PurgeBatch          = purgeBatch
	PurgedListRows      = purgedListRows
	PurgedProvenance    = purgedProvenance
	WebhookDeferred     = webhookDeferred
	WebhookDelivered    = webhookDelivered
	WebhookDiscarded    = webhookDiscarded
	WebhookFailed       = webhookFailed
	WebhookGone         = webhookGone
	WebhookMaxBodyBytes = webhookMaxBodyBytes
	WebhookThrottled    = webhookThrottled
)
