//go:build unix

// Command hermesq-producer-watch is hermesq's watch producer: it follows
// the files its configuration names and offers a watch_match event for each
// line that matches a watch's pattern, and one watch_disabled event when a
// watch stops (its file is gone, it matched more often than its rate allows,
// it was replaced by something other than a regular file, or it is disabled in the
// configuration).
//
// Its configuration is hermesq's config key producers.watch.config, which
// the host hands it as JSON:
//
//	producers:
//	  watch:
//	    config:
//	      watches:
//	        - name: build-log          # [A-Za-z0-9._:@/+-], unique
//	          path: /var/log/build.log # absolute
//	          pattern: 'ERROR|FAILED'  # Go regular expression
//	          session: s1
//	          target: ""               # pinned transcript; "": the session's current
//	          rate: 20/1m              # more matches in a minute stop the watch
//	          from_start: false        # a file first seen is read from its end
//	          disabled: false
//
// A path must name a regular file (a FIFO, a device or a folder is refused
// when the configuration is read, and a path replaced by one later stops its
// watch: "not a regular file"); it need not exist yet. A line is matched
// whole: a line longer than 64 KiB is never matched but skipped to its
// newline, however long it grows, logged and counted ("skipped" in the
// positions file), so it never holds back the lines after it.
//
// Identities are ["watch_match",NAME,"INODE-GEN:OFFSET"] (where the line
// starts in the file, GEN counting truncations and replacements) and
// ["watch_disabled",NAME,"REASON@INODE-GEN:OFFSET"]; texts are
// "[watch] NAME: LINE" and "[watch] NAME disabled: REASON (…)". The files
// are read when the host polls, from where the last read stopped, which is
// kept in the plugin's state folder.
package main

import (
	"context"
	"os"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

// watchProducer reads the files at every poll, then offers what the outbox
// holds, so a poll always sees every line written before it.
type watchProducer struct {
	*producer.Outbox
	w *Watcher
}

func (p watchProducer) Poll(ctx context.Context, req producer.PollRequest) ([]producer.Offer, error) {
	if err := p.w.Scan(ctx); err != nil {
		producer.Logger().Print(err)
	}
	return p.Outbox.Poll(ctx, req)
}

func main() {
	log := producer.Logger()
	raw := os.Getenv(producer.EnvConfig)
	if raw == "" {
		raw = "{}"
	}
	watches, err := parseConfig([]byte(raw))
	producer.Check(err) // hermesq doctor: the verdict, and exit
	if err != nil {
		log.Fatal(err)
	}
	dir := producer.StateDir()
	ob, err := producer.OpenOutbox(dir, producer.OutboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	w, err := NewWatcher(watches, ob, dir)
	if err != nil {
		log.Fatal(err)
	}
	plugin.Serve(watchProducer{Outbox: ob, w: w})
}
