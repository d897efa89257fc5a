package options

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
)

// FuzzParse feeds Parse arbitrary argument lists (arguments separated by NUL bytes). Parse
// must not panic, must fail only with ErrHelp, ErrVersion or an *Error, must be
// deterministic, and a result it accepts must give a valid, printable CommandLineOptions.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"-c\x00/etc/envoy.yaml\x00-l\x00warn",
		"--mode=validate\x00--concurrency\x000",
		"--mode validate",
		"--component-log-level\x00upstream:debug,config:trace",
		"--stats-tag\x00a:b\x00--stats-tag=c:d:e",
		"--socket-path\x00/tmp/s\x00--socket-mode\x00755",
		"--use-dynamic-base-id\x00--restart-epoch\x001",
		"--log-format\x00%v%\x00--log-format-prefix-with-location\x00true",
		"--\x00--bogus",
		"--help",
		"-",
		"--=",
		"-c=",
		"--max-obj-name-len\x0060\x00--max-stats\x000",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		o, err := Parse(args)
		again, errAgain := Parse(args)
		if (err == nil) != (errAgain == nil) || err != nil && err.Error() != errAgain.Error() {
			t.Fatalf("Parse(%q) not deterministic: %v then %v", args, err, errAgain)
		}
		if err != nil {
			var perr *Error
			if !errors.Is(err, ErrHelp) && !errors.Is(err, ErrVersion) && !errors.As(err, &perr) {
				t.Fatalf("Parse(%q) error %T %v; want ErrHelp, ErrVersion or *Error", args, err, err)
			}
			return
		}
		if diff := cmp.Diff(o, again); diff != "" {
			t.Fatalf("Parse(%q) not deterministic (-first +second):\n%s", args, diff)
		}
		if o.Concurrency == 0 {
			t.Errorf("Parse(%q).Concurrency = 0; want at least 1", args)
		}
		if _, ok := canonicalLevel(o.LogLevel); !ok {
			t.Errorf("Parse(%q).LogLevel = %q; want a level name", args, o.LogLevel)
		}
		clo := o.CommandLineOptions()
		if err := clo.Validate(); err != nil {
			t.Errorf("CommandLineOptions().Validate() = %v", err)
		}
		if _, err := protojson.Marshal(clo); err != nil {
			// Arguments that are not UTF-8 cannot be printed as proto strings.
			if !strings.Contains(err.Error(), "UTF-8") {
				t.Errorf("protojson.Marshal(CommandLineOptions()) error = %v", err)
			}
		}
	})
}
