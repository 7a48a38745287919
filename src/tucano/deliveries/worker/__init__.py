"""The delivery worker: claim due deliveries, POST them with bounded concurrency, record outcomes.

    loop ──claims──▶ dispatcher ──▶ senders ──attempt──▶ recorder ──records──▶ queue
      ▲              (per host:      (pool,     (prepare,   (batches)
      └── wakeup /    turns + cap)   slow       call,
          room freed / poll          watch)     success or failure)

`loop.DeliveryWorker` runs the whole; each module holds one part. Nothing is re-exported here:
`deliveries.service` imports `wakeup`, and the loop imports the queue.
"""
