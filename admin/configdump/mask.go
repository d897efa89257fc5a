package configdump

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// splitMask parses a FieldMask in string form as protobuf C++'s
// FieldMaskUtil::FromString does: comma-separated paths, empty ones skipped,
// each kept as written (snake_case field names).
func splitMask(mask string) []string {
	var paths []string
	for p := range strings.SplitSeq(mask, ",") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// maskDebugString renders paths as protobuf C++'s FieldMask::DebugString:
// one `paths: "<path>"` line per path, each ending in a newline.
func maskDebugString(paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		b.WriteString(`paths: "`)
		for i := 0; i < len(p); i++ {
			switch c := p[i]; c {
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '"', '\'', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			default:
				if c < 0x20 || c == 0x7f {
					b.WriteByte('\\')
					b.WriteByte('0' + c>>6)
					b.WriteByte('0' + c>>3&7)
					b.WriteByte('0' + c&7)
				} else {
					b.WriteByte(c)
				}
			}
		}
		b.WriteString("\"\n")
	}
	return b.String()
}

// pathFits reports whether path names a field of md the way protobuf C++'s
// FieldMaskUtil::GetFieldDescriptors checks it: every dot-separated segment
// is a field name, and every segment but the last is a singular message
// field (a mask cannot index through repeated fields, maps or an Any).
func pathFits(md protoreflect.MessageDescriptor, path string) bool {
	parts := strings.Split(path, ".")
	for i, part := range parts {
		if md == nil {
			return false
		}
		fd := md.Fields().ByName(protoreflect.Name(part))
		if fd == nil {
			return false
		}
		md = nil
		if i < len(parts)-1 && !fd.IsList() && !fd.IsMap() && fd.Message() != nil {
			md = fd.Message()
		}
	}
	return true
}

// maskTree is the normalized form of a set of paths: a node with nil
// children is a leaf that keeps its whole field.
type maskTree struct {
	children map[string]*maskTree
}

func newMaskTree(paths []string) *maskTree {
	root := &maskTree{children: map[string]*maskTree{}}
	for _, p := range paths {
		root.add(strings.Split(p, "."))
	}
	return root
}

// add inserts one path. A path below a leaf adds nothing; a path that ends
// at an inner node turns it into a leaf.
func (t *maskTree) add(parts []string) {
	node := t
	for i, part := range parts {
		last := i == len(parts)-1
		child, ok := node.children[part]
		switch {
		case !ok:
			child = &maskTree{}
			if !last {
				child.children = map[string]*maskTree{}
			}
			node.children[part] = child
		case child.children == nil:
			return
		case last:
			child.children = nil
		}
		node = child
	}
}

// trim clears every field of m the tree does not name and recurses into set
// singular message fields that the tree names with sub-paths, as protobuf
// C++'s FieldMaskUtil::TrimMessage does. A trimmed sub-message stays set
// even when it ends up empty.
func (t *maskTree) trim(m protoreflect.Message) {
	var set []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		set = append(set, fd)
		return true
	})
	for _, fd := range set {
		child, ok := t.children[string(fd.Name())]
		switch {
		case !ok || fd.IsExtension():
			m.Clear(fd)
		case child.children == nil:
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			child.trim(m.Mutable(fd).Message())
		}
	}
}

// trimChecked applies paths to m if every path fits m's type; it reports
// whether it did (Envoy's checkFieldMaskAndTrimMessage).
func trimChecked(m protoreflect.Message, paths []string) bool {
	for _, p := range paths {
		if !pathFits(m.Descriptor(), p) {
			return false
		}
	}
	newMaskTree(paths).trim(m)
	return true
}

// trimResource applies paths to one element of a resource list. Paths that
// start with the element's singular Any field (cluster, listener,
// route_config, secret, endpoint_config, ecds_filter) are split: the first
// segment stays in the outer mask and the rest is applied inside the
// unpacked resource, which is packed again. As in Envoy, a path naming just
// the Any field leaves an empty inner path, which fits nothing, so
// mask=cluster fails when the element's cluster is set. It reports whether
// every path fit.
func trimResource(m protoreflect.Message, paths []string) bool {
	fields := m.Descriptor().Fields()
	var outer, inner []string
	var anyField protoreflect.FieldDescriptor
	for _, p := range paths {
		head, rest, _ := strings.Cut(p, ".")
		fd := fields.ByName(protoreflect.Name(head))
		if fd == nil || fd.IsList() || fd.IsMap() || fd.Message() == nil || fd.Message().FullName() != "google.protobuf.Any" {
			outer = append(outer, p)
			continue
		}
		if anyField != nil && anyField != fd {
			// Envoy supports one Any field per resource.
			return false
		}
		anyField = fd
		outer = append(outer, head)
		inner = append(inner, rest)
	}
	if anyField != nil && m.Has(anyField) && !trimAny(m.Mutable(anyField).Message(), inner) {
		return false
	}
	return trimChecked(m, outer)
}

// trimAny unpacks the Any a, applies paths to the resource and packs it
// again under type.googleapis.com/, as Envoy's PackFrom does.
func trimAny(a protoreflect.Message, paths []string) bool {
	res, err := unpack(a)
	if err != nil || !trimChecked(res, paths) {
		return false
	}
	return repack(a, res, "type.googleapis.com/"+string(res.Descriptor().FullName())) == nil
}
