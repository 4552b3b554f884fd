package api

import "time"

// File event types of GET /v1/sandboxes/{id}/files/watch.
const (
	FileEventCreate = "create"
	FileEventWrite  = "write"
	FileEventRemove = "remove"
	FileEventRename = "rename"
	// FileEventOverflow says events were lost (the sandbox's inotify
	// queue overflowed): rescan what you care about.
	FileEventOverflow = "overflow"
	// FileEventError ends a watch, carrying the reason.
	FileEventError = "error"
)

// FileEvent is one change in a watched directory, reported in the order
// the sandbox's kernel saw them. A rename within the watch carries the
// old name in Path and the new one in NewPath; a rename out of the
// watched tree has no NewPath, and one into it is reported as a create.
type FileEvent struct {
	Type    string     `json:"type"`
	Path    string     `json:"path,omitempty"`
	NewPath string     `json:"new_path,omitempty"`
	IsDir   bool       `json:"is_dir,omitempty"`
	Time    time.Time  `json:"time"`
	Error   *ErrorBody `json:"error,omitempty"`
}
