package agent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// readFile streams a regular file: its info, then Data frames and EOF.
func (a *Agent) readFile(s io.ReadCloser, w *frameWriter, req agentproto.Request) {
	p, err := absPath("read", req.Path)
	if err != nil {
		w.fail(err)
		return
	}
	// Check before opening: opening a FIFO or a device can block or have
	// side effects. The opened file is checked again below.
	if fi, err := os.Stat(p); err != nil {
		w.fail(pathError("read", p, err))
		return
	} else if err := regularFile("read", p, fi); err != nil {
		w.fail(err)
		return
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		w.fail(pathError("read", p, err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		w.fail(pathError("read", p, err))
		return
	}
	if err := regularFile("read", p, fi); err != nil {
		w.fail(err)
		return
	}
	info := fileInfo(p, fi)
	if w.reply(agentproto.Reply{Info: &info}) != nil {
		return
	}

	// The daemon sends nothing more on a read stream; anything it does,
	// including closing it early, ends the transfer, so a reader that gave
	// up does not leave us blocked on flow control with the file open.
	go func() {
		io.Copy(io.Discard, s)
		s.Close()
	}()
	buf := make([]byte, agentproto.ChunkSize)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if w.frame(agentproto.FrameData, buf[:n]) != nil {
				return
			}
		}
		if err == io.EOF {
			w.frame(agentproto.FrameEOF, nil)
			return
		}
		if err != nil {
			w.fail(pathError("read", p, err))
			return
		}
	}
}

func regularFile(op, p string, fi os.FileInfo) error {
	if fi.IsDir() {
		return fmt.Errorf("%s %s: is a directory: %w", op, p, errdefs.ErrInvalidArgument)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s %s: not a regular file: %w", op, p, errdefs.ErrInvalidArgument)
	}
	return nil
}

// writeFile receives a file into a temporary name beside the target and
// renames it into place once synced, so a failed or aborted upload never
// leaves a partial file under the target name.
func (a *Agent) writeFile(s io.ReadWriteCloser, w *frameWriter, req agentproto.Request) {
	tmp, target, acct, err := a.openUpload(req)
	if err != nil {
		w.fail(err)
		return
	}
	discard := func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	if w.reply(agentproto.Reply{}) != nil {
		discard()
		return
	}
	size, gone, err := receive(s, tmp, target)
	if gone {
		discard() // the daemon aborted the upload
		return
	}
	if err == nil {
		err = commitUpload(tmp, target, acct, req.Mode)
	}
	if err != nil {
		discard()
		w.fail(err)
		// The daemon only reads our reply after sending all its data; keep
		// consuming it so its writes do not stall on flow control.
		drainUpload(s)
		return
	}
	w.reply(agentproto.Reply{Size: size})
}

// openUpload validates a write request and creates its temporary file.
func (a *Agent) openUpload(req agentproto.Request) (tmp *os.File, target string, acct *account, err error) {
	target, err = absPath("write", req.Path)
	if err != nil {
		return nil, "", nil, err
	}
	if target == "/" {
		return nil, "", nil, fmt.Errorf("write /: is a directory: %w", errdefs.ErrConflict)
	}
	if acct, err = a.account(req.User); err != nil {
		return nil, "", nil, err
	}
	dir := filepath.Dir(target)
	if req.Parents {
		if err := mkdirAllOwned(dir, 0o755, acct); err != nil {
			return nil, "", nil, pathError("write", target, err)
		}
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
		return nil, "", nil, fmt.Errorf("write %s: is a directory: %w", target, errdefs.ErrConflict)
	}
	tmp, err = createTemp(dir, filepath.Base(target))
	if err != nil {
		return nil, "", nil, pathError("write", target, err)
	}
	return tmp, target, acct, nil
}

// createTemp creates ".<base>.airlock-upload-<random>" in dir. The base is
// shortened so the name fits NAME_MAX even for a maximal target name.
func createTemp(dir, base string) (*os.File, error) {
	if len(base) > 180 {
		base = base[:180]
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, "."+base+".airlock-upload-"+hex.EncodeToString(rnd[:]))
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// receive copies Data frames into f, the upload of target, until EOF. gone reports that the
// stream failed before EOF, so there is nobody left to reply to.
func receive(s io.Reader, f *os.File, target string) (size int64, gone bool, err error) {
	for {
		fr, rerr := agentproto.ReadFrame(s)
		if rerr != nil {
			return size, true, rerr
		}
		switch fr.Type {
		case agentproto.FrameData:
			n, werr := f.Write(fr.Payload)
			size += int64(n)
			if werr != nil {
				return size, false, pathError("write", target, werr)
			}
		case agentproto.FrameEOF:
			return size, false, nil
		default:
			return size, false, fmt.Errorf("write: unexpected frame %q: %w", fr.Type, errdefs.ErrInvalidArgument)
		}
	}
}

// commitUpload makes the received file durable, gives it its mode and
// owner, and moves it over target.
func commitUpload(tmp *os.File, target string, acct *account, mode uint32) error {
	if mode == 0 {
		mode = 0o644
	}
	if err := tmp.Sync(); err != nil {
		return pathError("write", target, err)
	}
	// Explicit chmod: the create mode went through the umask.
	if err := tmp.Chmod(os.FileMode(mode&0o777) | modeBits(mode)); err != nil {
		return pathError("write", target, err)
	}
	if err := acct.chown(tmp.Name()); err != nil {
		return pathError("write", target, err)
	}
	if err := tmp.Close(); err != nil {
		return pathError("write", target, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		if fi, serr := os.Lstat(target); serr == nil && fi.IsDir() {
			// Created concurrently since openUpload checked.
			return fmt.Errorf("write %s: is a directory: %w", target, errdefs.ErrConflict)
		}
		return pathError("write", target, err)
	}
	syncDir(filepath.Dir(target))
	return nil
}

// modeBits converts the setuid, setgid and sticky bits of a unix mode to
// their os.FileMode flags.
func modeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// syncDir persists a rename. Best effort: the data itself is already
// synced, and not every filesystem supports fsync on a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// drainUpload discards the rest of a failed upload up to its EOF frame.
func drainUpload(s io.Reader) {
	for {
		fr, err := agentproto.ReadFrame(s)
		if err != nil || fr.Type == agentproto.FrameEOF {
			return
		}
	}
}
