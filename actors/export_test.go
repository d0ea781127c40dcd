package actors

// Key constructors for the tests of package actors_test that read or write
// records by hand.
var (
	DevLogKey        = devLogKey
	DevLogPrefix     = devLogPrefix
	FileChunksPrefix = fileChunksPrefix
	FileKey          = fileKey
	FilesPrefix      = filesPrefix
	LocatorKey       = locatorKey
	MessageKey       = messageKey
	MessagesPrefix   = messagesPrefix
	MessageTagKey    = messageTagKey
)
