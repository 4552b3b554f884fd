package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/archive"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// tarSkip keeps the kernel's virtual filesystems and the agent's own mount
// out of archives: /proc files claim sizes they do not have (kcore), and
// /.airlock holds the daemon's socket and the agent binary.
var tarSkip = map[string]bool{"/proc": true, "/sys": true, "/dev": true, "/.airlock": true}

func decodeTarRequest(op string, payload []byte) (agentproto.TarRequest, string, error) {
	var req agentproto.TarRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return req, "", fmt.Errorf("%s: bad request: %v: %w", op, err, errdefs.ErrInvalidArgument)
	}
	p, err := absPath(op, req.Path)
	return req, p, err
}

// tarRead streams a directory (or one file) as a tar archive in Data
// frames, ending with EOF, or with an error reply if it fails midway.
func (a *Agent) tarRead(ctx context.Context, s io.ReadCloser, w *frameWriter, payload []byte) {
	_, p, err := decodeTarRequest(agentproto.OpTarRead, payload)
	if err != nil {
		w.fail(err)
		return
	}
	if _, err := os.Stat(p); err != nil {
		w.fail(pathError(agentproto.OpTarRead, p, err))
		return
	}
	if w.replyJSON(agentproto.TarReply{}) != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The daemon sends nothing more; its closing the stream stops us.
	go func() {
		io.Copy(io.Discard, s)
		s.Close()
		cancel()
	}()
	bw := bufio.NewWriterSize(&dataWriter{fw: w}, agentproto.ChunkSize)
	_, err = archive.Write(ctx, bw, p, archive.WriteOptions{Skip: func(q string) bool { return tarSkip[q] }})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if ctx.Err() == nil {
			w.fail(err)
		}
		return
	}
	w.frame(agentproto.FrameEOF, nil)
}

// tarWrite extracts the archive the daemon sends into a directory, owned
// by the request's user. See internal/archive for how it stays inside the
// target and leaves nothing behind when it fails.
func (a *Agent) tarWrite(ctx context.Context, s io.ReadWriteCloser, w *frameWriter, payload []byte) {
	req, target, err := decodeTarRequest(agentproto.OpTarWrite, payload)
	if err != nil {
		w.fail(err)
		return
	}
	if req.MaxEntries < 0 || req.MaxBytes < 0 {
		w.fail(fmt.Errorf("tar_write: max_entries and max_bytes must not be negative: %w", errdefs.ErrInvalidArgument))
		return
	}
	if fi, err := os.Stat(target); err == nil && !fi.IsDir() {
		w.fail(fmt.Errorf("tar_write %s: not a directory: %w", target, errdefs.ErrInvalidArgument))
		return
	}
	acct, err := a.account(req.User)
	if err != nil {
		w.fail(err)
		return
	}
	opts := archive.ExtractOptions{MaxEntries: req.MaxEntries, MaxBytes: req.MaxBytes}
	if os.Geteuid() == 0 {
		opts.Owner = &archive.Owner{UID: int(acct.UID), GID: int(acct.GID)}
	}
	if w.replyJSON(agentproto.TarReply{}) != nil {
		return
	}
	in := &dataReader{r: s}
	res, err := archive.Extract(ctx, in, target, opts)
	if in.broken {
		return // the daemon aborted the upload; nobody to reply to
	}
	if err != nil {
		w.fail(err)
		if !in.eof {
			// The daemon reads our reply while it sends; keep consuming
			// so it is not stalled by flow control meanwhile.
			drainUpload(s)
		}
		return
	}
	w.replyJSON(agentproto.TarReply{Entries: res.Entries, Bytes: res.Bytes})
}

// dataWriter sends what is written as Data frames.
type dataWriter struct{ fw *frameWriter }

func (d *dataWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += agentproto.ChunkSize {
		end := min(off+agentproto.ChunkSize, len(p))
		if err := d.fw.frame(agentproto.FrameData, p[off:end]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// dataReader reads the payloads of Data frames up to the EOF frame.
type dataReader struct {
	r      io.Reader
	buf    []byte
	eof    bool // the EOF frame arrived
	broken bool // the stream failed before it
	err    error
}

func (d *dataReader) Read(p []byte) (int, error) {
	for len(d.buf) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		f, err := agentproto.ReadFrame(d.r)
		switch {
		case err != nil:
			d.broken, d.err = true, err
		case f.Type == agentproto.FrameData:
			d.buf = f.Payload
		case f.Type == agentproto.FrameEOF:
			d.eof, d.err = true, io.EOF
		default:
			d.err = fmt.Errorf("unexpected frame %q in the archive stream: %w", f.Type, errdefs.ErrInvalidArgument)
		}
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}
