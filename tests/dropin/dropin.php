<?php
// PHP workers of the drop-in corpus (tests/dropin_corpus_test.go).
//
// usage: php dropin.php ROW LOCKADDR,LOCKADDR COUNTERADDR WORKERS CYCLES
//
// Forks WORKERS processes; worker w locks through LOCKADDR[w % 2] with
// Symfony Lock (Debian's php-symfony-lock, RedisStore on php-redis), as
// installed and unchanged, and does the critical section of the corpus on
// the plain redis-server at COUNTERADDR. Prints "FAIL <reason>" and exits 1
// on the first error a worker meets.

require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

const RESOURCE = 'dropin';

function client(string $addr): Redis
{
    [$host, $port] = explode(':', $addr);
    $r = new Redis();
    $r->connect($host, (int) $port, 5.0);
    $r->setOption(Redis::OPT_READ_TIMEOUT, 30);
    return $r;
}

// The writer's critical section: a read-modify-write of the counter, with
// no reader inside.
function critical(Redis $plain, int $w, int $c): void
{
    $n = $plain->incr('inside');
    $plain->rawCommand('ZADD', 'peak', 'GT', $n, 'peak');
    $plain->set("held:$w", $c);
    if ((int) $plain->get('readers') !== 0) {
        throw new RuntimeException('a reader is inside with a writer');
    }
    $v = (int) $plain->get('counter');
    usleep(1000);
    $plain->set('counter', $v + 1);
    $plain->del("held:$w");
    $plain->decr('inside');
}

// The reader's: no writer inside, before and after a while.
function reading(Redis $plain): void
{
    $plain->incr('readers');
    for ($i = 0; $i < 2; $i++) {
        if ((int) $plain->get('inside') !== 0) {
            throw new RuntimeException('a writer is inside with a reader');
        }
        usleep(1000);
    }
    $plain->incr('counter');
    $plain->decr('readers');
}

// symfony-lock: exclusive locks, refreshed now and then, and every fourth
// cycle a shared (read) lock; the first cycle blocks in acquire(), which
// polls every 100 ms against workers that poll every few: its store's
// initial ttl (the default, 300 s) bounds how long it may wait, before
// acquire() refreshes the lock to its 10 s.
function symfony_lock(Redis $r, Redis $plain, int $w, int $cycles): void
{
    $factory = new LockFactory(new RedisStore($r));
    for ($c = 0; $c < $cycles; $c++) {
        $lock = $factory->createLock(RESOURCE, 10.0);
        if ($c % 4 === 3) {
            while (!$lock->acquireRead(false)) {
                usleep(random_int(1000, 3000));
            }
            reading($plain);
        } else {
            if ($c === 0) {
                $lock->acquire(true);
            } else {
                while (!$lock->acquire(false)) {
                    usleep(random_int(1000, 3000));
                }
            }
            if ($c % 10 === 5) {
                $lock->refresh();
            }
            critical($plain, $w, $c);
        }
        if (!$lock->isAcquired()) {
            throw new RuntimeException('isAcquired() is false while held');
        }
        $lock->release();
    }
}

[, $row, $lockAddrs, $counterAddr, $workers, $cycles] = $argv;
$addrs = explode(',', $lockAddrs);
$rows = ['symfony-lock' => 'symfony_lock'];
if (!isset($rows[$row])) {
    fwrite(STDOUT, "FAIL no row $row\n");
    exit(1);
}
$pids = [];
for ($w = 0; $w < (int) $workers; $w++) {
    $pid = pcntl_fork();
    if ($pid === 0) {
        try {
            $rows[$row](client($addrs[$w % count($addrs)]), client($counterAddr), $w, (int) $cycles);
            exit(0);
        } catch (Throwable $e) {
            $msg = get_class($e) . ': ' . $e->getMessage();
            for ($p = $e->getPrevious(); $p !== null; $p = $p->getPrevious()) {
                $msg .= ' <- ' . $p->getMessage();
            }
            fwrite(STDOUT, 'FAIL worker ' . $w . ': ' . preg_replace('/\s+/', ' ', $msg) . "\n");
            exit(1);
        }
    }
    $pids[] = $pid;
}
$failed = false;
foreach ($pids as $pid) {
    pcntl_waitpid($pid, $status);
    if (!pcntl_wifexited($status) || pcntl_wexitstatus($status) !== 0) {
        $failed = true;
    }
}
if ($failed) {
    exit(1);
}
echo "done\n";
