package actors

// Key constructors for the tests of package actors_test that read or write
// records by hand.
var (
	DevLogKey          = devLogKey
	DevLogPrefix       = devLogPrefix
	FileChunksPrefix   = fileChunksPrefix
	FileKey            = fileKey
	FilesPrefix        = filesPrefix
	LocatorKey         = locatorKey
	MessageKey         = messageKey
	MessagesPrefix     = messagesPrefix
	MessageTagKey      = messageTagKey
	ResponseURLsPrefix = responseURLsPrefix
	InstallationKey    = installationKey
	QueuedEventKey     = queuedEventKey
	DeliveredEventKey  = deliveredEventKey
	OutboxSourcePrefix = outboxSourcePrefix
)

// DropNotices makes the node lose every outbox notice, as a crash between
// a write and its notice would, until KeepNotices.
func DropNotices(env *Env) { env.testHookDropNotices.Store(true) }

// KeepNotices ends DropNotices.
func KeepNotices(env *Env) { env.testHookDropNotices.Store(false) }

// RetryWait is the wait after the n-th failed attempt with the draw jitter.
var RetryWait = retryWait
