// Package producerpb is the generated gRPC code of the producer plugin
// protocol (producer.proto). It is internal to pkg/producer: plugin authors
// use package producer only.
package producerpb

//go:generate bash ../../../../scripts/genproto.sh
