// Package store keeps the daemon's state in an embedded bbolt database, so
// that sandboxes can be listed and re-adopted after a restart without any
// external database. It also holds the data directory's lock: bbolt takes an
// exclusive flock on the file, so a second daemon cannot open it.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

var bucketSandboxes = []byte("sandboxes")

// ErrLocked is returned when another daemon holds the data directory.
var ErrLocked = errors.New("data directory is in use by another airlock daemon")

// Store is the daemon's state database.
type Store struct {
	db      *bolt.DB
	pidPath string
}

// Open opens (creating if needed) the state database in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, "airlock.db")
	pidPath := filepath.Join(dir, "airlock.pid")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			holder := "unknown pid"
			if b, rerr := os.ReadFile(pidPath); rerr == nil {
				holder = "pid " + strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("%w: %s is locked by %s; stop that daemon or use another --data directory", ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("open state db %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketSandboxes)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("init state db: %w", err)
	}
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		db.Close()
		return nil, fmt.Errorf("write pid file: %w", err)
	}
	return &Store{db: db, pidPath: pidPath}, nil
}

// Close releases the database and its lock.
func (s *Store) Close() error {
	os.Remove(s.pidPath)
	return s.db.Close()
}

// PutSandbox inserts or replaces a sandbox record.
func (s *Store) PutSandbox(sb api.Sandbox) error {
	b, err := json.Marshal(sb)
	if err != nil {
		return fmt.Errorf("encode sandbox: %w", err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).Put([]byte(sb.ID), b)
	})
}

// GetSandbox returns a record or an error wrapping errdefs.ErrNotFound.
func (s *Store) GetSandbox(id string) (api.Sandbox, error) {
	var sb api.Sandbox
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes).Get([]byte(id))
		if b == nil {
			return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
		}
		return json.Unmarshal(b, &sb)
	})
	return sb, err
}

// DeleteSandbox removes a record; a missing one is not an error.
func (s *Store) DeleteSandbox(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).Delete([]byte(id))
	})
}

// ListSandboxes returns every record, ordered by id.
func (s *Store) ListSandboxes() ([]api.Sandbox, error) {
	var out []api.Sandbox
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).ForEach(func(k, v []byte) error {
			var sb api.Sandbox
			if err := json.Unmarshal(v, &sb); err != nil {
				return fmt.Errorf("decode sandbox %s: %w", k, err)
			}
			out = append(out, sb)
			return nil
		})
	})
	return out, err
}
