package network

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/sandbox"
)

// Paths inside the sandbox.
const (
	resolvConf = "/etc/resolv.conf"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
)

// files writes the sandbox's resolv.conf (pointing at its DNS forwarder)
// and, with secrets, a CA bundle that adds its CA to the template's, and
// returns the attachment describing them.
func (m *Manager) files(st state, templateRoot string) (*sandbox.NetworkAttachment, error) {
	dir := filepath.Join(m.dir(st.ID), "files")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	gw := st.Link.Host.Addr().String()
	att := &sandbox.NetworkAttachment{
		NetNSPath: m.nsPath(st.ID),
		Address:   st.Link.Sandbox.Addr().String(),
		Gateway:   gw,
		Env:       map[string]string{},
	}
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+gw+"\n"), 0o644); err != nil {
		return nil, err
	}
	att.Mounts = append(att.Mounts, sandbox.BindMount{Source: resolv, Destination: resolvConf})
	for name, ph := range st.Placeholders {
		att.Env[name] = ph
	}
	if len(st.CACert) == 0 {
		return att, nil
	}
	bundle, err := readInRoot(templateRoot, caBundle)
	if err != nil {
		return nil, fmt.Errorf("read template CA bundle: %w", err)
	}
	if len(bundle) > 0 && !bytes.HasSuffix(bundle, []byte("\n")) {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, st.CACert...)
	bpath := filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(bpath, bundle, 0o644); err != nil {
		return nil, err
	}
	att.Mounts = append(att.Mounts, sandbox.BindMount{Source: bpath, Destination: caBundle})
	for _, v := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"} {
		att.Env[v] = caBundle
	}
	return att, nil
}

// readInRoot reads a regular file of a template with every symlink
// resolved inside root, so a template cannot point the daemon at a host
// file. A missing file reads as empty.
func readInRoot(root, path string) ([]byte, error) {
	if root == "" {
		return nil, nil
	}
	dirfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat2(dirfd, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, 16<<20))
}
