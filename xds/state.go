package xds

// serviceKey identifies a subscription to the resource called name on transport m.
func serviceKey(m *mux, name string) string { return m.key + "\x00" + name }
