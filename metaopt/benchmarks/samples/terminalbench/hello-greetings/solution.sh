#!/bin/bash
mkdir -p greetings
printf 'Hello, world!\n' > greetings/hello.txt
printf 'Goodbye, world!\n' > greetings/goodbye.txt
