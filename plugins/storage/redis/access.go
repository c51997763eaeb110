package redis

import (
	"context"
	"sort"
	"strings"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Caller is the ACL user this connection authenticated as (ACL WHOAMI).
// The default user names no one: every client that reaches a server
// without ACL users is "default", so then Name is empty and no principal is
// protected. A user allowed to list the ACL users administers the server
// (it could give itself any right) and is the StoreAdmin.
func (s *Store) Caller(ctx context.Context) (backend.Caller, error) {
	var c backend.Caller
	err := s.readRetry(ctx, "acl whoami", func() error {
		who, err := s.client.Do(ctx, "ACL", "WHOAMI").Text()
		if err != nil {
			if isUnknownCommand(err) {
				who, err = "default", nil // a server without ACLs
			} else {
				return err
			}
		}
		c = backend.Caller{}
		if who != "default" {
			c.Name, c.Verified = who, true
		}
		if err := s.client.Do(ctx, "ACL", "USERS").Err(); err == nil {
			c.StoreAdmin = true
		} else if isUnknownCommand(err) {
			c.StoreAdmin = true
		} else if !isNoPerm(err) {
			return err
		}
		return nil
	})
	return c, err
}

func isUnknownCommand(err error) bool {
	return strings.HasPrefix(err.Error(), "ERR unknown command")
}

func isNoPerm(err error) bool {
	return strings.HasPrefix(err.Error(), "NOPERM")
}

// SetAdmin adds principal to, or removes it from, the admins set.
func (s *Store) SetAdmin(ctx context.Context, principal string, admin bool) error {
	if err := backend.CheckSetAdmin(principal, admin); err != nil {
		return err
	}
	if admin {
		if err := s.client.SAdd(ctx, s.k.admins(), principal).Err(); err != nil {
			return s.wrap("grant admin", err)
		}
		return nil
	}
	n, err := s.client.SRem(ctx, s.k.admins(), principal).Result()
	if err != nil {
		return s.wrap("revoke admin", err)
	}
	if n == 0 {
		return backend.Errorf(backend.ErrNotFound, "redis: revoke admin: %q is not an admin", principal)
	}
	return nil
}

// Admins lists the principals with the admin right, sorted.
func (s *Store) Admins(ctx context.Context) ([]string, error) {
	var out []string
	err := s.readRetry(ctx, "list admins", func() error {
		var err error
		out, err = s.client.SMembers(ctx, s.k.admins()).Result()
		return err
	})
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out, err
}
