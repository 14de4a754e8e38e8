// The shop's header, drawn on every page after sign-in.
(() => {
  const user = sessionStorage.getItem("user") || "guest";
  const header = document.createElement("header");
  header.innerHTML = `<span class="brand">Northwind Outfitters</span>
    <nav aria-label="Account">
      <a id="nav-home" href="home.html">Home</a>
      <a id="nav-orders" href="orders.html">Orders</a>
      <a id="nav-payments" href="payments.html">Payment methods</a>
      <a id="nav-cart" href="cart.html">Cart (2)</a>
    </nav><span class="user">Signed in as ${user.replace(/[<&]/g, "")}</span>`;
  document.body.prepend(header);
})();
