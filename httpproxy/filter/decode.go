package filter

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Validated is a generated config message with its protoc-gen-validate checks.
type Validated interface {
	proto.Message
	ValidateAll() error
}

// Decode unmarshals cfg, which must be of type url, into m and runs m's checks; errors start
// with path (the filter and the field that held cfg).
func Decode(cfg *anypb.Any, url, path string, m Validated) error {
	if cfg.GetTypeUrl() != url {
		return fmt.Errorf("%s: type %q; want %s", path, cfg.GetTypeUrl(), url)
	}
	if err := cfg.UnmarshalTo(m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := m.ValidateAll(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// TypeURL is the type URL of m's message type in an Any.
func TypeURL(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}
