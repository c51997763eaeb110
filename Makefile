.PHONY: demo test build install generate bench
demo:     ## a short real demo on the default (bbolt) store
	bash examples/demo.sh
test:     ## everything CI runs (installs redis-server when missing and root)
	bash scripts/test.sh
build:
	go build -o bin/hermesq ./cmd/hermesq
	go build -o bin/hermesq-producers ./cmd/hermesq-producers
	go build -o bin/hermesq-top ./cmd/hermesq-top
PREFIX ?= $(HOME)/.local
PLUGIN_DIR ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/hermesq/plugins
install:  ## hermesq, hermesq-producers and hermesq-top in $(PREFIX)/bin, every producer plugin in $(PLUGIN_DIR)
	mkdir -p $(PREFIX)/bin $(PLUGIN_DIR)
	go build -o $(PREFIX)/bin/hermesq ./cmd/hermesq
	go build -o $(PREFIX)/bin/hermesq-producers ./cmd/hermesq-producers
	go build -o $(PREFIX)/bin/hermesq-top ./cmd/hermesq-top
	for p in plugins/producers/*/; do go build -o $(PLUGIN_DIR)/hermesq-producer-$$(basename $$p) ./$$p || exit 1; done
generate: ## completions/, man/ and the producer protocol's Go code (needs protoc)
	go run ./internal/gendocs
	bash scripts/genproto.sh
bench:
	go test -run '^$$' -bench . -benchtime 2000x ./plugins/storage/...
