module github.com/ehsink/ehsink/deploy

go 1.26.8
