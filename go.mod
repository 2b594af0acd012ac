module github.com/redlock-proxy/redlock-proxy

go 1.26.8
