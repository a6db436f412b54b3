/* What every state object (csrc/_owner.pxd) needs from C: a count of the
 * forks this process came from. A lock held by another thread when the
 * process forked stays held in the child, where its holder does not exist;
 * an object compares the count it made its lock under with this one and
 * makes a new lock in the child. One counter per extension module (static):
 * each module registers its own handler once, at import (sf_owner_init). */
#ifndef SF_OWNER_H
#define SF_OWNER_H

#if defined(_WIN32)
/* no fork on Windows */
static long sf_fork_generation = 0;
static int sf_owner_init(void) { return 0; }
#else
#include <pthread.h>
static long sf_fork_generation = 0;
static int sf_owner_registered = 0;
static void sf_owner_on_fork_child(void) { sf_fork_generation++; }
static int sf_owner_init(void)
{
    if (!sf_owner_registered) {
        if (pthread_atfork(NULL, NULL, sf_owner_on_fork_child) != 0)
            return -1;
        sf_owner_registered = 1;
    }
    return 0;
}
#endif

static long sf_owner_generation(void) { return sf_fork_generation; }

#endif
