"""The delivery worker: claim due deliveries, POST them with bounded concurrency, record outcomes.

    loop ──claims──▶ dispatcher ──▶ N senders ──attempts──▶ recorder
      ▲              (per target:     (sender,    (outcome,    (one statement
      └── wakeup /    queue + cap)     retry)      next retry)  per batch)
          room freed / poll

`loop.DeliveryWorker` runs the whole; each module holds one part. Nothing is re-exported here:
`deliveries.outbox` imports `wakeup`, and the loop imports the queue.
"""
