"""One module per command family: parse the flags, call one domain function, print."""
