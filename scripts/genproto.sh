#!/usr/bin/env bash
# Regenerates the producer plugin protocol's Go code (pkg/producer/internal/producerpb)
# with the protoc-gen-go and protoc-gen-go-grpc versions pinned by go.mod's tool
# directives. protoc itself comes from the system (Debian: protobuf-compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v protoc >/dev/null 2>&1; then
  echo "genproto: protoc missing; install with: sudo apt-get install -y protobuf-compiler" >&2
  exit 1
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
cd pkg/producer/internal/producerpb
PATH="$bin:$PATH" protoc --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative producer.proto
