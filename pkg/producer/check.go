package producer

import (
	"fmt"
	"os"
)

// EnvCheck, set to 1, asks a plugin only to check its configuration and
// exit, without serving: hermesq doctor starts each plugin so, with the
// environment producers run would give it (EnvName, EnvConfig, and a
// scratch EnvStateDir).
const EnvCheck = "HERMESQ_PRODUCER_CHECK"

// CheckOnly reports whether the plugin was started only to check its
// configuration ($HERMESQ_PRODUCER_CHECK=1).
func CheckOnly() bool { return os.Getenv(EnvCheck) == "1" }

// Check ends a plugin started only to check its configuration (CheckOnly)
// with the verdict of the plugin's own configuration check: exit 0 when err
// is nil, else err's message on stderr and exit 2. Otherwise it returns at
// once and the plugin goes on to serve. Call it in main, right after the
// configuration is read and checked, before anything else is opened:
//
//	watches, err := parseConfig(os.Getenv(producer.EnvConfig))
//	producer.Check(err)
//	if err != nil { … }
func Check(err error) {
	if !CheckOnly() {
		return
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}
