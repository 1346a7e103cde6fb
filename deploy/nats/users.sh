#!/bin/sh
# Generated from permissions.conf by deploy/nats/nscusers (go generate ./deploy): do not edit
# it, edit permissions.conf. The same account and users, for operator mode (nsc): the .creds
# the Deployment mounts.
set -eu
nsc add account METERING
nsc edit account METERING --js-disk-storage 20G   # JetStream for the account: size it for the streams and the bucket
# the service: least privilege
nsc add user --account METERING --name meter-consumer \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS' \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS_DLQ' \
  --allow-pub '$JS.API.STREAM.INFO.KV_METER_READS_meter-consumer_records' \
  --allow-pub '$JS.API.CONSUMER.INFO.METER_READS.meter-consumer' \
  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.METER_READS.meter-consumer' \
  --allow-pub '$JS.ACK.METER_READS.meter-consumer.>' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS_DLQ' \
  --allow-pub '$KV.METER_READS_meter-consumer_records.>' \
  --allow-pub '$JS.API.DIRECT.GET.KV_METER_READS_meter-consumer_records.>' \
  --allow-pub 'meter.dlq.>' \
  --allow-pub '$JS.API.CONSUMER.CREATE.METER_READS_DLQ.*.meter.dlq.>' \
  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.DELETE.METER_READS_DLQ.*' \
  --allow-sub '_INBOX_meter_consumer.>'
# provisioning: one run with --create-streams (and --reconcile), then retire it
nsc add user --account METERING --name meter-provisioner \
  --allow-pub '$JS.API.INFO' \
  --allow-pub '$JS.API.STREAM.CREATE.METER_READS' \
  --allow-pub '$JS.API.STREAM.CREATE.METER_READS_DLQ' \
  --allow-pub '$JS.API.STREAM.CREATE.KV_METER_READS_meter-consumer_records' \
  --allow-pub '$JS.API.STREAM.UPDATE.METER_READS' \
  --allow-pub '$JS.API.STREAM.UPDATE.METER_READS_DLQ' \
  --allow-pub '$JS.API.CONSUMER.CREATE.METER_READS.meter-consumer' \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS' \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS_DLQ' \
  --allow-pub '$JS.API.STREAM.INFO.KV_METER_READS_meter-consumer_records' \
  --allow-pub '$JS.API.CONSUMER.INFO.METER_READS.meter-consumer' \
  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.METER_READS.meter-consumer' \
  --allow-pub '$JS.ACK.METER_READS.meter-consumer.>' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS_DLQ' \
  --allow-pub '$KV.METER_READS_meter-consumer_records.>' \
  --allow-pub '$JS.API.DIRECT.GET.KV_METER_READS_meter-consumer_records.>' \
  --allow-pub 'meter.dlq.>' \
  --allow-pub '$JS.API.CONSUMER.CREATE.METER_READS_DLQ.*.meter.dlq.>' \
  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.DELETE.METER_READS_DLQ.*' \
  --allow-sub '_INBOX_meter_consumer.>'
# consumer dlq stats, list, show, replay --dry-run
nsc add user --account METERING --name meter-dlq-reader \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS_DLQ' \
  --allow-pub '$JS.API.CONSUMER.CREATE.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.INFO.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.DELETE.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS_DLQ' \
  --allow-sub '_INBOX_meter_dlq_reader.>'
# consumer dlq: all of it, replay and purge too
nsc add user --account METERING --name meter-dlq-operator \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS_DLQ' \
  --allow-pub '$JS.API.CONSUMER.CREATE.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.INFO.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.DELETE.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS_DLQ' \
  --allow-pub '$JS.API.STREAM.MSG.DELETE.METER_READS_DLQ' \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS' \
  --allow-pub 'meter.reads.>' \
  --allow-pub 'meter.dlq._mark.>' \
  --allow-sub '_INBOX_meter_dlq_operator.>'
# consumer audit: reads both streams and the durable's info, changes nothing
nsc add user --account METERING --name meter-audit \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS' \
  --allow-pub '$JS.API.STREAM.MSG.GET.METER_READS' \
  --allow-pub '$JS.API.CONSUMER.INFO.METER_READS.meter-consumer' \
  --allow-pub '$JS.API.STREAM.INFO.METER_READS_DLQ' \
  --allow-pub '$JS.API.CONSUMER.CREATE.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.MSG.NEXT.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.INFO.METER_READS_DLQ.*' \
  --allow-pub '$JS.API.CONSUMER.DELETE.METER_READS_DLQ.*' \
  --allow-sub '_INBOX_meter_audit.>'
nsc push --account METERING                       # the account, with JetStream, to the server's resolver
nsc generate creds --account METERING --name meter-consumer --output-file meter-consumer.creds
nsc generate creds --account METERING --name meter-provisioner --output-file meter-provisioner.creds
nsc generate creds --account METERING --name meter-dlq-reader --output-file meter-dlq-reader.creds
nsc generate creds --account METERING --name meter-dlq-operator --output-file meter-dlq-operator.creds
nsc generate creds --account METERING --name meter-audit --output-file meter-audit.creds
