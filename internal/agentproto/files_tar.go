package agentproto

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Directory transfer operations (docs/AGENT_PROTOCOL.md, "tar_read,
// tar_write").
const (
	OpTarRead  = "tar_read"
	OpTarWrite = "tar_write"
)

// TarRequest is the request of tar_read and tar_write.
type TarRequest struct {
	Op   string `json:"op"`
	Path string `json:"path"`

	// tar_write: the owner of what is created (default: the agent's
	// default user) and caps on the archive (0: the agent's defaults).
	User       string `json:"user,omitempty"`
	MaxEntries int64  `json:"max_entries,omitempty"`
	MaxBytes   int64  `json:"max_bytes,omitempty"`
}

// TarReply is the reply of tar_read and tar_write: first an empty
// acknowledgement, then for tar_write the counts of what was extracted.
type TarReply struct {
	Error   *WireError `json:"error,omitempty"`
	Entries int64      `json:"entries,omitempty"`
	Bytes   int64      `json:"bytes,omitempty"`
}

func readTarReply(ctx context.Context, r io.Reader) (TarReply, error) {
	f, err := ReadFrame(r)
	if err != nil {
		return TarReply{}, streamErr(ctx, err)
	}
	if f.Type != FrameReply {
		return TarReply{}, unexpected(f)
	}
	var rep TarReply
	if err := f.Decode(&rep); err != nil {
		return TarReply{}, err
	}
	if rep.Error != nil {
		return rep, rep.Error
	}
	return rep, nil
}

// ReadTar streams path (a directory, or a single file) as a tar archive.
// The caller must close the reader; an error the agent hits mid-stream is
// returned by Read.
func (c *Client) ReadTar(ctx context.Context, path string) (io.ReadCloser, error) {
	s, stop, err := c.stream(ctx, TarRequest{Op: OpTarRead, Path: path})
	if err != nil {
		return nil, err
	}
	if _, err := readTarReply(ctx, s); err != nil {
		stop()
		return nil, err
	}
	return &fileReader{ctx: ctx, r: s, stop: stop}, nil
}

// WriteTar extracts the tar archive r yields into the directory req.Path
// (Op is set) and returns what was extracted. The agent refuses a bad
// target before the archive is sent, and an archive it rejects (escaping
// names, over a cap) as soon as it sees the offending entry.
func (c *Client) WriteTar(ctx context.Context, req TarRequest, r io.Reader) (TarReply, error) {
	req.Op = OpTarWrite
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return TarReply{}, err
	}
	defer stop()
	if _, err := readTarReply(ctx, s); err != nil {
		return TarReply{}, err
	}
	final := make(chan tarResult, 1)
	go func() {
		rep, err := readTarReply(ctx, s)
		final <- tarResult{rep, err}
	}()
	// finish reports the agent's verdict after a send failed or ended.
	finish := func(sendErr error) (TarReply, error) {
		res := <-final
		if res.err == nil && sendErr != nil {
			res.err = sendErr
		}
		return res.rep, res.err
	}
	buf := make([]byte, ChunkSize)
	for {
		select {
		case res := <-final:
			if res.err == nil {
				res.err = errors.New("agentproto: tar_write finished before the archive was sent")
			}
			return res.rep, res.err
		default:
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := WriteFrame(s, FrameData, buf[:n]); err != nil {
				return finish(streamErr(ctx, err))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			// Abort: closing the stream makes the agent discard what it
			// extracted so far.
			stop()
			<-final
			if ctx.Err() != nil {
				return TarReply{}, ctx.Err()
			}
			return TarReply{}, fmt.Errorf("read archive: %w", rerr)
		}
	}
	if err := WriteFrame(s, FrameEOF, nil); err != nil {
		return finish(streamErr(ctx, err))
	}
	return finish(nil)
}

type tarResult struct {
	rep TarReply
	err error
}
