package store

import (
	"errors"
	"testing"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestSandboxCRUD(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.GetSandbox("sb-x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"b", "a"} {
		if err := s.PutSandbox(api.Sandbox{ID: id, Labels: map[string]string{"k": id}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetSandbox("a")
	if err != nil || got.Labels["k"] != "a" {
		t.Fatalf("get a: %+v %v", got, err)
	}
	list, err := s.ListSandboxes()
	if err != nil || len(list) != 2 || list[0].ID != "a" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := s.DeleteSandbox("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox("a"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}
