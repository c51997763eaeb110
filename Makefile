.PHONY: demo test build generate bench
demo:     ## a short real demo on the default (bbolt) store
	bash examples/demo.sh
test:     ## everything CI runs (installs redis-server when missing and root)
	bash scripts/test.sh
build:
	go build -o bin/hermesq ./cmd/hermesq
generate: ## completions/, man/ and the producer protocol's Go code (needs protoc)
	go run ./internal/gendocs
	bash scripts/genproto.sh
bench:
	go test -run '^$$' -bench . -benchtime 2000x ./plugins/storage/...
