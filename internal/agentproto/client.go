package agentproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// ErrClosed is returned when the connection to the agent is gone.
var ErrClosed = errors.New("agent connection closed")

// MuxConfig is the yamux configuration both sides use.
func MuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = io.Discard
	c.KeepAliveInterval = 10 * time.Second
	c.ConnectionWriteTimeout = 30 * time.Second
	c.StreamOpenTimeout = 30 * time.Second
	return c
}

// Client is the daemon's side of one agent connection. It opens a stream
// per operation; it is safe for concurrent use.
type Client struct {
	sess *yamux.Session
}

// NewClient runs the protocol's daemon side over conn, which may be any
// reliable byte stream (unix socket, TCP, vsock, serial).
func NewClient(conn net.Conn) (*Client, error) {
	sess, err := yamux.Client(conn, MuxConfig())
	if err != nil {
		return nil, fmt.Errorf("agentproto: start mux: %w", err)
	}
	return &Client{sess: sess}, nil
}

// Close tears down the connection and every stream on it.
func (c *Client) Close() error { return c.sess.Close() }

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.sess.CloseChan() }

// stream opens a stream, sends req (a Request or an operation's own
// request type) and arranges for ctx cancellation to abort it. The
// returned stop must be called when the stream is finished.
func (c *Client) stream(ctx context.Context, req any) (*yamux.Stream, func(), error) {
	if c.sess.IsClosed() {
		return nil, nil, fmt.Errorf("%w: %w", errdefs.ErrUnavailable, ErrClosed)
	}
	s, err := c.sess.OpenStream()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: open agent stream: %w", errdefs.ErrUnavailable, err)
	}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	if err := WriteJSON(s, FrameRequest, req); err != nil {
		stop()
		s.Close()
		return nil, nil, fmt.Errorf("%w: send request: %w", errdefs.ErrUnavailable, err)
	}
	return s, func() { stop(); s.Close() }, nil
}

// readReply reads the next frame, which must be a reply, and returns its error.
func readReply(ctx context.Context, r io.Reader) (Reply, error) {
	f, err := ReadFrame(r)
	if err != nil {
		return Reply{}, streamErr(ctx, err)
	}
	if f.Type != FrameReply {
		return Reply{}, unexpected(f)
	}
	var rep Reply
	if err := f.Decode(&rep); err != nil {
		return Reply{}, err
	}
	return rep, rep.err()
}

func streamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: agent stream: %w", errdefs.ErrUnavailable, err)
}

// call performs a single request/reply operation.
func (c *Client) call(ctx context.Context, req Request) (Reply, error) {
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return Reply{}, err
	}
	defer stop()
	return readReply(ctx, s)
}

// Hello checks the agent is alive and speaks this protocol.
func (c *Client) Hello(ctx context.Context) (Reply, error) {
	rep, err := c.call(ctx, Request{Op: OpHello})
	if err != nil {
		return rep, err
	}
	if rep.Version != Version {
		return rep, fmt.Errorf("agent speaks protocol %d, daemon %d", rep.Version, Version)
	}
	return rep, nil
}

// ExecIO wires an exec's streams. Stdin may be nil (the process gets
// /dev/null); it is copied by a goroutine that may still call Read once
// after Exec returns. OnStart, if set, is called with the pid once it runs.
type ExecIO struct {
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	OnStart func(pid int)
}

// Exec runs req (Op is set to exec) and streams its output until it exits.
// Cancelling ctx kills the process tree.
func (c *Client) Exec(ctx context.Context, req Request, eio ExecIO) (ExitStatus, error) {
	req.Op = OpExec
	req.Stdin = eio.Stdin != nil
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return ExitStatus{}, err
	}
	defer stop()
	rep, err := readReply(ctx, s)
	if err != nil {
		return ExitStatus{}, err
	}
	if eio.OnStart != nil {
		eio.OnStart(rep.PID)
	}
	if eio.Stdin != nil {
		go sendStdin(s, eio.Stdin)
	}
	for {
		f, err := ReadFrame(s)
		if err != nil {
			return ExitStatus{}, streamErr(ctx, err)
		}
		switch f.Type {
		case FrameStdout:
			if eio.Stdout != nil {
				if _, err := eio.Stdout.Write(f.Payload); err != nil {
					return ExitStatus{}, fmt.Errorf("write stdout: %w", err)
				}
			}
		case FrameStderr:
			if eio.Stderr != nil {
				if _, err := eio.Stderr.Write(f.Payload); err != nil {
					return ExitStatus{}, fmt.Errorf("write stderr: %w", err)
				}
			}
		case FrameReply:
			var rep Reply
			if err := f.Decode(&rep); err != nil {
				return ExitStatus{}, err
			}
			if rep.Error != nil {
				return ExitStatus{}, rep.Error
			}
			if rep.Exit == nil {
				return ExitStatus{}, errors.New("agentproto: exec reply without exit status")
			}
			return *rep.Exit, nil
		default:
			return ExitStatus{}, unexpected(f)
		}
	}
}

// sendStdin copies r to the stream as Data frames and ends with EOF. Errors
// end the copy silently: the process sees EOF and the exec result still
// arrives.
func sendStdin(s io.Writer, r io.Reader) {
	buf := make([]byte, ChunkSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if WriteFrame(s, FrameData, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			WriteFrame(s, FrameEOF, nil)
			return
		}
	}
}

// OpenFile starts reading path and returns its info and contents. The
// caller must close the reader.
func (c *Client) OpenFile(ctx context.Context, path string) (api.FileInfo, io.ReadCloser, error) {
	s, stop, err := c.stream(ctx, Request{Op: OpRead, Path: path})
	if err != nil {
		return api.FileInfo{}, nil, err
	}
	rep, err := readReply(ctx, s)
	if err != nil {
		stop()
		return api.FileInfo{}, nil, err
	}
	if rep.Info == nil {
		stop()
		return api.FileInfo{}, nil, errors.New("agentproto: read reply without info")
	}
	return *rep.Info, &fileReader{ctx: ctx, r: s, stop: stop}, nil
}

type fileReader struct {
	ctx  context.Context
	r    io.Reader
	stop func()
	buf  []byte
	err  error
	once sync.Once
}

func (f *fileReader) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		fr, err := ReadFrame(f.r)
		if err != nil {
			f.err = streamErr(f.ctx, err)
			continue
		}
		switch fr.Type {
		case FrameData:
			f.buf = fr.Payload
		case FrameEOF:
			f.err = io.EOF
		case FrameReply:
			var rep Reply
			if err := fr.Decode(&rep); err != nil {
				f.err = err
			} else if rep.Error != nil {
				f.err = rep.Error
			} else {
				f.err = unexpected(fr)
			}
		default:
			f.err = unexpected(fr)
		}
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func (f *fileReader) Close() error {
	f.once.Do(f.stop)
	return nil
}

// WriteFile streams r into path (Op is set to write) and returns the bytes
// written. Parents creates missing directories; User owns what is created.
func (c *Client) WriteFile(ctx context.Context, req Request, r io.Reader) (int64, error) {
	req.Op = OpWrite
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return 0, err
	}
	defer stop()
	// The agent answers first to say whether it could open the file, so a
	// bad path fails before the body is sent.
	if _, err := readReply(ctx, s); err != nil {
		return 0, err
	}
	// The agent replies early if the write fails (disk full), so watch for
	// its reply while sending instead of pushing the whole body first.
	final := make(chan replyResult, 1)
	go func() {
		rep, err := readReply(ctx, s)
		final <- replyResult{rep, err}
	}()
	buf := make([]byte, ChunkSize)
	for {
		select {
		case res := <-final:
			if res.err == nil {
				res.err = errors.New("agentproto: write finished before the upload was sent")
			}
			return res.rep.Size, res.err
		default:
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := WriteFrame(s, FrameData, buf[:n]); err != nil {
				res := <-final
				if res.err != nil {
					return 0, res.err
				}
				return 0, streamErr(ctx, err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, fmt.Errorf("read upload body: %w", rerr)
		}
	}
	if err := WriteFrame(s, FrameEOF, nil); err != nil {
		res := <-final
		if res.err != nil {
			return 0, res.err
		}
		return 0, streamErr(ctx, err)
	}
	res := <-final
	return res.rep.Size, res.err
}

type replyResult struct {
	rep Reply
	err error
}

// Stat describes path without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (api.FileInfo, error) {
	rep, err := c.call(ctx, Request{Op: OpStat, Path: path})
	if err != nil {
		return api.FileInfo{}, err
	}
	if rep.Info == nil {
		return api.FileInfo{}, errors.New("agentproto: stat reply without info")
	}
	return *rep.Info, nil
}

// List lists a directory, descending depth levels (1 = direct children).
func (c *Client) List(ctx context.Context, path string, depth int) ([]api.FileInfo, error) {
	rep, err := c.call(ctx, Request{Op: OpList, Path: path, Depth: depth})
	return rep.Files, err
}

// Mkdir creates a directory owned by user.
func (c *Client) Mkdir(ctx context.Context, path string, parents bool, user string) error {
	_, err := c.call(ctx, Request{Op: OpMkdir, Path: path, Parents: parents, User: user})
	return err
}

// Remove removes path; recursive removes a non-empty directory.
func (c *Client) Remove(ctx context.Context, path string, recursive bool) error {
	_, err := c.call(ctx, Request{Op: OpRemove, Path: path, Recursive: recursive})
	return err
}

// Rename moves from to to.
func (c *Client) Rename(ctx context.Context, from, to string) error {
	_, err := c.call(ctx, Request{Op: OpRename, Path: from, To: to})
	return err
}
