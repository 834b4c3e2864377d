#!/bin/bash
# Prints the release that would be deployed.
echo "releasing ${1:-main}"
