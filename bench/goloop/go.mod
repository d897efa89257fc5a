module github.com/legateproxy/legate/bench/goloop

go 1.26
