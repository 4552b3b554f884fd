package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

var bucketSecrets = []byte("secrets")

// Secret is a stored secret. The value is kept in clear because the
// egress proxy must send it; the data directory must be readable by root
// only (the daemon creates it 0700).
type Secret struct {
	api.Secret
	Value string `json:"value"`
}

// PutSecret inserts or replaces a secret.
func (s *Store) PutSecret(sec Secret) error {
	b, err := json.Marshal(sec)
	if err != nil {
		return fmt.Errorf("encode secret: %w", err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketSecrets)
		if err != nil {
			return err
		}
		return bk.Put([]byte(sec.Name), b)
	})
}

// GetSecret returns a secret or an error wrapping errdefs.ErrNotFound.
func (s *Store) GetSecret(name string) (Secret, error) {
	var sec Secret
	err := s.db.View(func(tx *bolt.Tx) error {
		var b []byte
		if bk := tx.Bucket(bucketSecrets); bk != nil {
			b = bk.Get([]byte(name))
		}
		if b == nil {
			return fmt.Errorf("secret %s: %w", name, errdefs.ErrNotFound)
		}
		return json.Unmarshal(b, &sec)
	})
	return sec, err
}

// DeleteSecret removes a secret; a missing one is not an error.
func (s *Store) DeleteSecret(name string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucketSecrets); bk != nil {
			return bk.Delete([]byte(name))
		}
		return nil
	})
}

// ListSecrets returns every secret, ordered by name.
func (s *Store) ListSecrets() ([]Secret, error) {
	var out []Secret
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketSecrets)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			var sec Secret
			if err := json.Unmarshal(v, &sec); err != nil {
				return fmt.Errorf("decode secret %s: %w", k, err)
			}
			out = append(out, sec)
			return nil
		})
	})
	return out, err
}
