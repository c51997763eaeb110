package redis

import (
	"regexp"
	"testing"
)

// Every script loads (its text is read on first use, so a missing or
// misnamed file would otherwise only show when the script first runs).
func TestScriptsLoad(t *testing.T) {
	sha := regexp.MustCompile(`^[0-9a-f]{40}$`)
	for _, sc := range []*script{
		scriptOpenSession, scriptGetSession, scriptGrant, scriptRevoke, scriptAdmit, scriptClaim,
		scriptSettle, scriptSettleRun, scriptRequeue, scriptResolve, scriptCancel, scriptAcquireLease,
		scriptRenewLease, scriptReleaseLease, scriptAddViewer, scriptRemoveViewer, scriptCloseSession,
		scriptCompress, scriptSwitch, scriptImportSession, scriptImportTranscript, scriptImportMessage,
		scriptImportAdmission, scriptReleaseClaim, scriptSwapLookup, scriptCompact, scriptSettleClaim,
	} {
		text := sc.load()
		if !sha.MatchString(text.hash) || len(text.src) == 0 {
			t.Errorf("script %s: hash %q, %d bytes of text", sc.name, text.hash, len(text.src))
		}
	}
}
