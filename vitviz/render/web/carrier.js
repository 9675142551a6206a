// A carrier of the settings a browser view holds (the app makes one per such view). The settings live in the page's
// one state (page.js: state.views); the view writes them with window.vitvizState.set(view, values), every event that
// needs them (the server's figures) reads this element's value, and a download reads them at the moment of its
// click (window.vitvizState.get). Assigning the value fires the element's change event, so a burst of changes (a
// slider dragged) is assigned once, when it settles; a quiet set (the settings as the server already used them) is
// held without asking the server anything. Made before the page's script has run, the door holds what it is given
// until page.js takes it in.
const state = window.vitvizState || (window.vitvizState = {
  carriers: {}, held: {},
  set(view, values, opts) {
    this.held[view] = { ...(this.held[view] || {}), ...values };
    const carrier = this.carriers[view];
    if (carrier && !(opts && opts.quiet)) carrier(this.held[view]);
  },
  get(view) { return this.held[view] || null; },
});
(state.values || (state.values = {}))[props.view_name] = () => props.value;  // as the link or the view left it
let timer = null;
state.carriers[props.view_name] = (values) => {
  clearTimeout(timer);
  timer = setTimeout(() => { props.value = JSON.stringify(values); }, 300);
};
