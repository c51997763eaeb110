// Package stats holds the figures behind 'hermesq stats', 'check' and
// 'top' that a program can read too: each producer's outbox figures
// (producers.go), the check of the queue and producer figures against
// thresholds, OK, WARNING or CRITICAL, with its Nagios status line
// (check.go), and the Prometheus text exposition of them all
// (prometheus.go). The queues' figures themselves are
// admission.Service.Stats (pkg/admission/stats.go).
//
// It reads no configuration and opens nothing: the caller hands it the
// figures it read (which producers exist and where their outboxes are is
// the command line's to know).
package stats
