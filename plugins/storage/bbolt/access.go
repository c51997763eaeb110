package bbolt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Caller is the OS user of this process. A file store authenticates no one:
// whoever can open the file (mode 0600: its owner) can read and write all
// of it, so the name is not Verified; the file's owner is its StoreAdmin.
func (s *Store) Caller(ctx context.Context) (backend.Caller, error) {
	c := backend.Caller{Name: OSUser()}
	fi, err := os.Stat(s.path)
	if err != nil {
		return c, backend.Errorf(backend.ErrUnavailable, "bbolt: stat %s: %v", s.path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		c.StoreAdmin = int(st.Uid) == os.Getuid()
	}
	return c, nil
}

// OSUser is the name of the OS user running this process (uid:N when the
// user database does not name it).
func OSUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}

// SetAdmin adds principal to, or removes it from, the admins of meta/.
func (s *Store) SetAdmin(ctx context.Context, principal string, admin bool) error {
	if err := backend.CheckSetAdmin(principal, admin); err != nil {
		return fmt.Errorf("bbolt: set admin: %w", err)
	}
	return s.update(ctx, func(t *txn) error {
		admins, err := t.admins()
		if err != nil {
			return err
		}
		has := slices.Contains(admins, principal)
		switch {
		case admin && !has:
			admins = append(admins, principal)
		case !admin && has:
			admins = slices.DeleteFunc(admins, func(a string) bool { return a == principal })
		case !admin:
			return backend.Errorf(backend.ErrNotFound, "bbolt: revoke admin: %q is not an admin", principal)
		default:
			return nil
		}
		slices.Sort(admins)
		b, err := json.Marshal(admins)
		if err != nil {
			return err
		}
		return t.tx.Bucket(bucketMeta).Put(keyAdmins, b)
	})
}

// Admins lists the principals with the admin right, sorted.
func (s *Store) Admins(ctx context.Context) ([]string, error) {
	var out []string
	err := s.view(ctx, func(t *txn) error {
		a, err := t.admins()
		out = a
		return err
	})
	return out, err
}

func (t *txn) admins() ([]string, error) {
	v := t.tx.Bucket(bucketMeta).Get(keyAdmins)
	if v == nil {
		return []string{}, nil
	}
	var a []string
	if err := decode("admins", v, &a); err != nil {
		return nil, err
	}
	return a, nil
}

// Grant gives g.Principal g.Role on the session, replacing its grant.
func (s *Store) Grant(ctx context.Context, session string, g backend.Grant) error {
	if err := backend.CheckGrant(g); err != nil {
		return fmt.Errorf("bbolt: grant on session %s: %w", session, err)
	}
	return s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if g.Principal == rec.Owner {
			return backend.Errorf(backend.ErrInvalid, "bbolt: grant on session %s: %q is its owner", session, g.Principal)
		}
		grants := slices.DeleteFunc(slices.Clone(rec.Grants), func(o backend.Grant) bool { return o.Principal == g.Principal })
		if len(grants) >= backend.MaxGrants {
			return backend.Errorf(backend.ErrConflict, "bbolt: grant on session %s: it has %d grants, the limit", session, backend.MaxGrants)
		}
		rec.Grants = backend.NormalGrants(append(grants, g))
		return t.putSession(sb, rec)
	})
}

// Revoke removes principal's grant on the session.
func (s *Store) Revoke(ctx context.Context, session, principal string) error {
	return s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		n := len(rec.Grants)
		rec.Grants = slices.DeleteFunc(rec.Grants, func(o backend.Grant) bool { return o.Principal == principal })
		if len(rec.Grants) == n {
			return backend.Errorf(backend.ErrNotFound, "bbolt: revoke on session %s: %q has no grant", session, principal)
		}
		return t.putSession(sb, rec)
	})
}
