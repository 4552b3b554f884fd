package api

// TarResult is the response of PUT /v1/sandboxes/{id}/files/tar: the
// directory extracted into, the number of archive entries and the bytes of
// file contents written.
type TarResult struct {
	Path    string `json:"path"`
	Entries int64  `json:"entries"`
	Bytes   int64  `json:"bytes"`
}
