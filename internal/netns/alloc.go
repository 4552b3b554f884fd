package netns

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// lockPath serialises address allocation among every Airlock daemon on the
// host, so two daemons sharing a pool never hand out the same /30.
const lockPath = "/run/airlock-netns.lock"

// Lock takes the host-wide allocation lock; call the returned function to
// release it once the chosen addresses are on an interface.
func Lock() (func(), error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", lockPath, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	return func() { f.Close() }, nil
}

// Allocate picks a free /30 in pool: one not overlapping any address on any
// host interface. The caller holds Lock. The host end gets the first usable
// address and the sandbox the second.
func Allocate(pool netip.Prefix) (Link, error) {
	if !pool.Addr().Is4() || pool.Bits() > 28 {
		return Link{}, fmt.Errorf("sandbox address pool %s must be IPv4 and at least a /28", pool)
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return Link{}, fmt.Errorf("list host addresses: %w", err)
	}
	used := map[uint32]bool{}
	base := be32(pool.Masked().Addr())
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if ok && pool.Contains(ip) {
			used[(be32(ip)-base)/4] = true
		}
	}
	slots := uint32(1) << (32 - pool.Bits() - 2)
	var r [4]byte
	rand.Read(r[:])
	start := binary.BigEndian.Uint32(r[:]) % slots
	for i := uint32(0); i < slots; i++ {
		s := (start + i) % slots
		if used[s] {
			continue
		}
		net := base + s*4
		return Link{
			Host:    netip.PrefixFrom(addr32(net+1), 30),
			Sandbox: netip.PrefixFrom(addr32(net+2), 30),
		}, nil
	}
	return Link{}, fmt.Errorf("%w: no free addresses left in the sandbox pool %s", errdefs.ErrResourceExhausted, pool)
}

func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addr32(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
