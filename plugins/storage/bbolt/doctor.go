package bbolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hermesq/hermesq/pkg/backend"
)

var _ backend.Doctor = (*Store)(nil)

// maxCheckErrors bounds the consistency errors a doctor report lists.
const maxCheckErrors = 5

// Doctor checks the store file: its mode and its folder's, the schema
// version, the pages free, and bbolt's own consistency check of every page.
func (s *Store) Doctor(ctx context.Context) ([]backend.Finding, error) {
	var out []backend.Finding
	add := func(check, status, detail, repair string) {
		out = append(out, backend.Finding{Check: check, Status: status, Detail: detail, Repair: repair})
	}
	if fi, err := os.Stat(s.path); err == nil {
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			add("store file mode", backend.FindingFail, fmt.Sprintf("%s has mode %04o: other users may read or write it", s.path, m), "chmod 600 "+s.path)
		} else {
			add("store file mode", backend.FindingOK, fmt.Sprintf("%s has mode %04o", s.path, m), "")
		}
	}
	dir := filepath.Dir(s.path)
	if fi, err := os.Stat(dir); err == nil {
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			add("store folder mode", backend.FindingWarn, fmt.Sprintf("%s has mode %04o: other users may list it", dir, m), "chmod 700 "+dir)
		} else {
			add("store folder mode", backend.FindingOK, fmt.Sprintf("%s has mode %04o", dir, m), "")
		}
	}
	err := s.view(ctx, func(t *txn) error {
		meta := t.tx.Bucket(bucketMeta)
		add("schema version", backend.FindingOK, fmt.Sprintf("%d (this hermesq knows up to %d)", fromU64(meta.Get(keySchema)), schemaVersion), "")
		st := t.tx.DB().Stats()
		pages := t.tx.Size() / int64(t.tx.DB().Info().PageSize)
		free := st.FreePageN + st.PendingPageN
		status, repair := backend.FindingOK, ""
		if pages > 64 && int64(free)*2 > pages {
			status = backend.FindingWarn
			repair = "more than half the file is free pages: export the store, import it into a new file, and replace the old one"
		}
		add("free pages", status, fmt.Sprintf("%d of %d pages free (%d bytes in the file)", free, pages, t.tx.Size()), repair)
		var errs []string
		n := 0
		for err := range t.tx.Check() {
			n++
			if len(errs) < maxCheckErrors {
				errs = append(errs, err.Error())
			}
		}
		if n > 0 {
			add("consistency", backend.FindingFail, fmt.Sprintf("%d errors in the file's pages: %v", n, errs),
				"restore "+s.path+" from a backup or an export; 'hermesq export' may still read what is intact")
		} else {
			add("consistency", backend.FindingOK, "every page checked", "")
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	return out, nil
}
